package vbmc

import (
	"fmt"
	"runtime"
	"strconv"
)

// qemuArgsAArch64 is the command line of an aarch64 VM: QEMU's virt
// machine with AAVMF (UEFI), a PL011 serial port, the same devices and ids
// as an x86-64 VM's where virt has them (the NIC, the disk, the Storage
// controller's drives), and the CD on a SCSI bus, since virt has no IDE.
// KVM runs it only on an arm64 host; elsewhere TCG emulates a Cortex-A57,
// the fastest of QEMU's arm64 CPU models to emulate (no pointer
// authentication or SVE).
func (m *Machine) qemuArgsAArch64(order []bootDevice, cdImage string) []string {
	idx := map[bootDevice]int{}
	for i, d := range order {
		idx[d] = bootIndexBaseA + i
	}
	a := []string{"-name", m.vm.Name, "-uuid", m.UUID(), "-machine", "virt"}
	kvm := runtime.GOARCH == "arm64" && (m.cfg.Accel == AccelKVM || m.cfg.Accel == AccelAuto && kvmUsable())
	if kvm {
		a = append(a, "-accel", "kvm", "-cpu", "host")
	} else {
		a = append(a, "-accel", "tcg", "-cpu", "cortex-a57")
	}
	code, vars, _ := m.secureBootFirmware()
	a = append(a,
		"-m", strconv.Itoa(m.vm.MemoryMB),
		"-smp", strconv.Itoa(m.vm.CPUs),
		"-nodefaults",
		"-display", "none",
		"-daemonize",
		"-pidfile", m.pidFile(),
		"-qmp", "unix:"+m.qmpSocket()+",server=on,wait=off",
		"-chardev", m.serialChardev(),
		"-serial", "chardev:s0",
		"-device", "virtio-rng-pci",
		"-drive", "if=pflash,format=raw,unit=0,readonly=on,file="+code,
		"-drive", "if=pflash,format=raw,unit=1,file="+vars,
	)
	a = append(a, m.vncArgs()...)
	a = append(a, m.netdevArgs()...)
	// No option ROM: QEMU's are x86 iPXE builds, and AAVMF's own network
	// stack boots, as an arm64 server's firmware does (pxe/dhcp.go).
	nic := fmt.Sprintf("virtio-net-pci,id=%s,mac=%s,bootindex=%d,romfile=", devNet, m.vm.MAC, idx[devNet])
	if m.vm.Netdev != "none" {
		nic += ",netdev=n0"
	}
	a = append(a, "-device", nic)
	a = append(a, m.diskArgs(idx[devDisk])...)
	cd := "if=none,id=cd0drive,media=cdrom,readonly=on"
	if cdImage != "" {
		cd += ",format=raw,file=" + cdImage
	}
	a = append(a,
		"-device", "virtio-scsi-pci,id=cdscsi",
		"-drive", cd,
		"-device", fmt.Sprintf("scsi-cd,id=%s,drive=cd0drive,bus=cdscsi.0,bootindex=%d", devCD, idx[devCD]),
	)
	return append(a, m.vm.QEMUExtra...)
}
