package vbmc

import (
	"log/slog"
	"strings"
	"testing"
)

// TestAArch64VM: an aarch64 VM runs in qemu-system-aarch64's virt machine
// with AAVMF and the NIC's x86 option ROM off, its CD on SCSI (virt has no
// IDE), under TCG on an x86-64 host; an aarch64 VM without UEFI and an
// unknown arch are refused.
func TestAArch64VM(t *testing.T) {
	cfg := Config{StateDir: "/tmp/x", Password: "p", Accel: AccelAuto, VMs: []VM{
		{Name: "arm", MAC: "52:54:00:00:00:20", Disk: "/tmp/x/arm.raw", Firmware: FirmwareUEFI, Arch: ArchAArch64},
	}}
	if err := cfg.normalize(); err != nil {
		t.Fatal(err)
	}
	m := newMachine(&cfg, cfg.VMs[0], slog.Default())
	if m.qemuBinary() != DefaultQEMUBinaryAArch64 {
		t.Errorf("binary %s, want %s", m.qemuBinary(), DefaultQEMUBinaryAArch64)
	}
	args := strings.Join(m.qemuArgs(m.bootOrder(BootOverride{Target: BootTargetPxe, Enabled: BootOnce}), ""), " ")
	for _, want := range []string{
		"-machine virt", "-drive if=pflash,format=raw,unit=0,readonly=on,file=" + AAVMFCode, "unit=1,file=/tmp/x/arm/AAVMF_VARS.fd",
		"virtio-net-pci,id=net0,mac=52:54:00:00:00:20,bootindex=1,romfile=",
		"virtio-blk-pci,id=disk0,drive=disk0drive,bootindex=2", "scsi-cd,id=cd0,drive=cd0drive,bus=cdscsi.0,bootindex=3",
		"-serial chardev:s0", "-device virtio-rng-pci",
	} {
		if !strings.Contains(args, want) {
			t.Errorf("args lack %q:\n%s", want, args)
		}
	}
	for _, not := range []string{"q35", "ide-cd", "OVMF", "sercon"} {
		if strings.Contains(args, not) {
			t.Errorf("an aarch64 VM's args hold %q:\n%s", not, args)
		}
	}
	for _, bad := range []VM{
		{Name: "arm", MAC: "52:54:00:00:00:20", Arch: ArchAArch64},
		{Name: "ppc", MAC: "52:54:00:00:00:21", Firmware: FirmwareUEFI, Arch: "ppc64le"},
	} {
		c := Config{StateDir: "/tmp/x", Password: "p", VMs: []VM{bad}}
		if err := c.normalize(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}
