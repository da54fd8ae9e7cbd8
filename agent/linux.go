//go:build linux

package agent

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/ironflow/ironflow/shadow"

	"github.com/google/uuid"
	"golang.org/x/sys/unix"

	"github.com/ironflow/ironflow/agent/client"
)

// LinuxHardware is the real machine: disks from /sys/block opened under
// /dev, inventory from /proc and /sys, power through reboot(2), UEFI boot
// entries through efivarfs.
type LinuxHardware struct {
	SysRoot  string // default /sys
	DevRoot  string // default /dev
	ProcRoot string // default /proc
	// Logs, when set, is handed over by log.collect_system_logs.
	Logs func() map[string][]byte
	// AccountRoot is the root whose /etc rescue.finalize_rescue writes the
	// rescue user into ("/" in the ramdisk); empty refuses rescue, so that
	// the agent run on a spare machine for debugging never changes its
	// accounts.
	AccountRoot string
	// BootIF is the kernel command line's BOOTIF: the inventory's
	// boot.pxe_interface.
	BootIF string
	// LLDP, when set, gives each interface's LLDP TLVs to the inventory
	// (ipa-collect-lldp=1).
	LLDP *LLDPCollector
}

// SetRescueUser implements Rescuer: the rescue user's /etc/passwd, group
// and shadow entries under AccountRoot.
func (h *LinuxHardware) SetRescueUser(_ context.Context, hash string) error {
	if h.AccountRoot == "" {
		return errNoRescue
	}
	return shadow.SetUser(h.AccountRoot, RescueUser, hash)
}

func (h *LinuxHardware) sys(p ...string) string {
	root := h.SysRoot
	if root == "" {
		root = "/sys"
	}
	return filepath.Join(append([]string{root}, p...)...)
}

func (h *LinuxHardware) dev(name string) string {
	root := h.DevRoot
	if root == "" {
		root = "/dev"
	}
	return filepath.Join(root, name)
}

func (h *LinuxHardware) proc(p string) string {
	root := h.ProcRoot
	if root == "" {
		root = "/proc"
	}
	return filepath.Join(root, p)
}

func readTrim(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

var (
	pciAddr = regexp.MustCompile(`^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)
	hctlRe  = regexp.MustCompile(`^\d+:\d+:\d+:\d+$`)
)

func blockKind(name, sysDir string) string {
	switch {
	case strings.HasPrefix(name, "loop"):
		return "loop"
	case strings.HasPrefix(name, "ram"), strings.HasPrefix(name, "zram"):
		return "ram"
	case strings.HasPrefix(name, "sr"), readTrim(filepath.Join(sysDir, "device", "type")) == "5":
		return "cdrom"
	case strings.HasPrefix(name, "fd"):
		return "floppy"
	case strings.HasPrefix(name, "dm-"), strings.HasPrefix(name, "md"), strings.HasPrefix(name, "nbd"):
		return "virtual"
	}
	return "disk"
}

// BlockDevices implements Hardware.
func (h *LinuxHardware) BlockDevices(context.Context) ([]BlockDevice, error) {
	entries, err := os.ReadDir(h.sys("block"))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", h.sys("block"), err)
	}
	var out []BlockDevice
	for _, e := range entries {
		name := e.Name()
		dir := h.sys("block", name)
		sectors, _ := strconv.ParseInt(readTrim(filepath.Join(dir, "size")), 10, 64)
		d := BlockDevice{
			Name:       h.dev(name),
			Size:       sectors * 512,
			Rotational: readTrim(filepath.Join(dir, "queue", "rotational")) == "1",
			Removable:  readTrim(filepath.Join(dir, "removable")) == "1",
			ReadOnly:   readTrim(filepath.Join(dir, "ro")) == "1",
			Model:      readTrim(filepath.Join(dir, "device", "model")),
			Vendor:     readTrim(filepath.Join(dir, "device", "vendor")),
			Kind:       blockKind(name, dir),
		}
		for _, p := range []string{"serial", "device/serial"} {
			if s := readTrim(filepath.Join(dir, p)); s != "" {
				d.Serial = s
				break
			}
		}
		for _, p := range []string{"wwid", "device/wwid"} {
			if s := readTrim(filepath.Join(dir, p)); s != "" {
				d.WWN = strings.TrimPrefix(strings.TrimPrefix(s, "naa."), "eui.")
				if !strings.HasPrefix(d.WWN, "0x") && isHex(d.WWN) {
					d.WWN = "0x" + d.WWN
				}
				break
			}
		}
		if real, err := filepath.EvalSymlinks(filepath.Join(dir, "device")); err == nil && hctlRe.MatchString(filepath.Base(real)) {
			d.HCTL = filepath.Base(real)
		}
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			d.ByPath = byPath(real, d.HCTL, name)
		}
		if d.Size == 0 {
			continue
		}
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// byPath derives udev's /dev/disk/by-path name from the sysfs path (there
// is no udev in the ramdisk): pci-<addr>, with -scsi-0:C:T:L or -nvme-N.
func byPath(sysPath, hctl, name string) string {
	var pci string
	for _, c := range strings.Split(sysPath, "/") {
		if pciAddr.MatchString(c) {
			pci = c
		}
	}
	if pci == "" {
		return ""
	}
	p := "/dev/disk/by-path/pci-" + pci
	switch {
	case hctl != "":
		f := strings.Split(hctl, ":")
		p += "-scsi-0:" + f[1] + ":" + f[2] + ":" + f[3]
	case strings.HasPrefix(name, "nvme"):
		if i := strings.LastIndex(name, "n"); i > 0 {
			p += "-nvme-" + name[i+1:]
		}
	}
	return p
}

// linuxDevice is an open block device.
type linuxDevice struct {
	*os.File
	size int64
	// sysDir is the disk's /sys/block directory ("" when unknown).
	sysDir string
}

func (d *linuxDevice) Size() int64 { return d.size }

// Open implements Hardware. O_EXCL refuses a disk that is mounted or in use.
func (h *LinuxHardware) Open(bd BlockDevice) (Device, error) {
	f, err := os.OpenFile(bd.Name, os.O_RDWR|unix.O_EXCL, 0)
	if err != nil {
		return nil, err
	}
	size, err := f.Seek(0, 2)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("size of %s: %w", bd.Name, err)
	}
	return &linuxDevice{File: f, size: size, sysDir: h.sys("block", filepath.Base(bd.Name))}, nil
}

// SyncAll implements Hardware.
func (h *LinuxHardware) SyncAll() error {
	unix.Sync()
	return nil
}

// Power implements Hardware.
func (h *LinuxHardware) Power(_ context.Context, action PowerAction) error {
	unix.Sync()
	cmd := unix.LINUX_REBOOT_CMD_POWER_OFF
	if action == Reboot {
		cmd = unix.LINUX_REBOOT_CMD_RESTART
	}
	if err := unix.Reboot(cmd); err != nil {
		return fmt.Errorf("reboot(2) %s: %w", action, err)
	}
	return nil
}

// SystemLogs implements LogSource.
func (h *LinuxHardware) SystemLogs(context.Context) map[string][]byte {
	out := map[string][]byte{}
	if h.Logs != nil {
		out = h.Logs()
	}
	for _, f := range []string{"cmdline", "mounts", "modules", "meminfo", "partitions"} {
		if b, err := os.ReadFile(h.proc(f)); err == nil {
			out["proc/"+f] = b
		}
	}
	return out
}

// Inventory implements Hardware.
func (h *LinuxHardware) Inventory(ctx context.Context) (client.Inventory, error) {
	var inv client.Inventory
	if f, err := os.Open(h.proc("cpuinfo")); err == nil {
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if !ok {
				continue
			}
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			switch k {
			case "processor":
				inv.CPU.Count++
			case "model name":
				inv.CPU.ModelName = v
			case "cpu MHz":
				inv.CPU.Frequency = v
			case "flags":
				inv.CPU.Flags = strings.Fields(v)
			}
		}
		f.Close()
	}
	var uts unix.Utsname
	if unix.Uname(&uts) == nil {
		inv.CPU.Architecture = unix.ByteSliceToString(uts.Machine[:])
		inv.Hostname = unix.ByteSliceToString(uts.Nodename[:])
	}
	if f, err := os.Open(h.proc("meminfo")); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "MemTotal:" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				inv.Memory.Total = kb * 1024
				inv.Memory.PhysicalMB = (kb + 1023) / 1024
			}
		}
		f.Close()
	}
	// The installed memory, when the firmware describes its DIMMs (see
	// smbios.go); MemTotal above is the fallback.
	if table, err := os.ReadFile(h.sys("firmware", "dmi", "tables", "DMI")); err == nil {
		if mb, err := smbiosMemoryMB(table); err == nil {
			inv.Memory.PhysicalMB = mb
		}
	}
	devs, err := h.BlockDevices(ctx)
	if err != nil {
		return inv, err
	}
	for _, d := range devs {
		if d.Kind != "disk" {
			continue
		}
		inv.Disks = append(inv.Disks, client.Disk{Name: d.Name, Model: d.Model, Size: d.Size, Rotational: d.Rotational,
			WWN: d.WWN, Serial: d.Serial, Vendor: d.Vendor, ByPath: d.ByPath, HCTL: d.HCTL})
	}
	ifaces, _ := os.ReadDir(h.sys("class", "net"))
	for _, e := range ifaces {
		name := e.Name()
		if name == "lo" {
			continue
		}
		it := client.Interface{Name: name, MACAddress: readTrim(h.sys("class", "net", name, "address")),
			HasCarrier: new(readTrim(h.sys("class", "net", name, "carrier")) == "1")}
		if ni, err := net.InterfaceByName(name); err == nil {
			addrs, _ := ni.Addrs()
			for _, a := range addrs {
				ipn, ok := a.(*net.IPNet)
				switch {
				case !ok:
				case ipn.IP.To4() != nil && it.IPV4Address == "":
					it.IPV4Address = ipn.IP.String()
				case ipn.IP.To4() == nil && ipn.IP.IsGlobalUnicast() && it.IPV6Address == "":
					it.IPV6Address = ipn.IP.String()
				}
			}
		}
		h.nicDevice(&it)
		inv.Interfaces = append(inv.Interfaces, it)
	}
	if h.LLDP != nil {
		lldp := h.LLDP.Wait(ctx)
		for i := range inv.Interfaces {
			inv.Interfaces[i].LLDP = lldp[inv.Interfaces[i].Name]
		}
	}
	inv.Boot.PXEInterface = h.BootIF
	dmi := func(f string) string { return readTrim(h.sys("class", "dmi", "id", f)) }
	inv.SystemVendor = client.SystemVendor{Manufacturer: dmi("sys_vendor"), ProductName: dmi("product_name"), SerialNumber: dmi("product_serial")}
	inv.Boot.CurrentBootMode = "bios"
	if _, err := os.Stat(h.sys("firmware", "efi")); err == nil {
		inv.Boot.CurrentBootMode = "uefi"
	}
	return inv, nil
}

// nicDevice fills the interface's device facts from sysfs: PCI IDs and
// address, driver, link speed (-1 or unreadable when the link is down:
// left out).
func (h *LinuxHardware) nicDevice(it *client.Interface) {
	dev := h.sys("class", "net", it.Name, "device")
	it.Vendor, it.Product = readTrim(filepath.Join(dev, "vendor")), readTrim(filepath.Join(dev, "device"))
	if target, err := filepath.EvalSymlinks(dev); err == nil {
		// virtio NICs sit under their PCI function: .../0000:00:03.0/virtio0
		for p := target; p != "/" && p != "."; p = filepath.Dir(p) {
			if base := filepath.Base(p); pciAddress.MatchString(base) {
				it.PCIAddress = base
				break
			}
		}
	}
	if drv, err := filepath.EvalSymlinks(filepath.Join(dev, "driver")); err == nil {
		it.Driver = filepath.Base(drv)
	}
	if v, err := strconv.Atoi(readTrim(h.sys("class", "net", it.Name, "speed"))); err == nil && v > 0 {
		it.SpeedMbps = v
	}
}

// pciAddress is a PCI function's sysfs name (domain:bus:device.function).
var pciAddress = regexp.MustCompile(`^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)

// efiGlobalGUID is EFI_GLOBAL_VARIABLE, the namespace of Boot#### and BootOrder.
const efiGlobalGUID = "8be4df61-93ca-11d2-aa0d-00e098032b8c"

// efiVarAttrs: non-volatile, boot service and runtime access.
const efiVarAttrs = 0x7

// AddUEFIBootEntry implements Hardware through efivarfs.
func (h *LinuxHardware) AddUEFIBootEntry(_ context.Context, bd BlockDevice, part UEFIPartition, loader string) error {
	if _, err := os.Stat(h.sys("firmware", "efi")); err != nil {
		return ErrNotUEFI
	}
	vars := h.sys("firmware", "efi", "efivars")
	if _, err := os.Stat(vars); err != nil {
		if err := unix.Mount("efivarfs", vars, "efivarfs", 0, ""); err != nil {
			return fmt.Errorf("mount efivarfs: %w", err)
		}
	}
	opt, err := efiLoadOption("ironflow "+filepath.Base(bd.Name), part, loader)
	if err != nil {
		return err
	}
	var num = -1
	for i := 0; i < 0x10000; i++ {
		if _, err := os.Stat(filepath.Join(vars, fmt.Sprintf("Boot%04X-%s", i, efiGlobalGUID))); errors.Is(err, os.ErrNotExist) {
			num = i
			break
		}
	}
	if num < 0 {
		return errors.New("no free Boot#### variable")
	}
	if err := writeEFIVar(filepath.Join(vars, fmt.Sprintf("Boot%04X-%s", num, efiGlobalGUID)), opt); err != nil {
		return err
	}
	orderPath := filepath.Join(vars, "BootOrder-"+efiGlobalGUID)
	order := []byte{byte(num), byte(num >> 8)}
	if old, err := os.ReadFile(orderPath); err == nil && len(old) > 4 {
		order = append(order, old[4:]...)
	}
	return writeEFIVar(orderPath, order)
}

// writeEFIVar writes an efivarfs file (4 attribute bytes + data), clearing
// the immutable flag efivarfs puts on existing variables.
func writeEFIVar(path string, data []byte) error {
	if f, err := os.Open(path); err == nil {
		if flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS); err == nil && flags&fsImmutableFL != 0 {
			_ = unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, int(flags&^fsImmutableFL))
		}
		f.Close()
	}
	buf := make([]byte, 4, 4+len(data))
	binary.LittleEndian.PutUint32(buf, efiVarAttrs)
	buf = append(buf, data...)
	// efivarfs needs the whole variable in one write.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("open EFI variable %s: %w", filepath.Base(path), err)
	}
	if _, err := f.Write(buf); err != nil {
		f.Close()
		return fmt.Errorf("write EFI variable %s: %w", filepath.Base(path), err)
	}
	return f.Close()
}

// efiLoadOption encodes an EFI_LOAD_OPTION: attributes, the device path of
// the loader (hard drive media node + file path node + end), description.
func efiLoadOption(desc string, part UEFIPartition, loader string) ([]byte, error) {
	hd := make([]byte, 42)
	hd[0], hd[1] = 0x04, 0x01 // media device path, hard drive
	binary.LittleEndian.PutUint16(hd[2:], 42)
	binary.LittleEndian.PutUint32(hd[4:], uint32(part.Number))
	binary.LittleEndian.PutUint64(hd[8:], part.StartLBA)
	binary.LittleEndian.PutUint64(hd[16:], part.SizeLBA)
	if part.GPT {
		g, err := uuid.Parse(part.PartGUID)
		if err != nil {
			return nil, fmt.Errorf("partition GUID %q: %w", part.PartGUID, err)
		}
		// EFI GUIDs store the first three fields little-endian.
		b := g[:]
		sig := []byte{b[3], b[2], b[1], b[0], b[5], b[4], b[7], b[6]}
		sig = append(sig, b[8:]...)
		copy(hd[24:40], sig)
		hd[40], hd[41] = 0x02, 0x02 // GPT, GUID signature
	} else {
		binary.LittleEndian.PutUint32(hd[24:], part.MBRDiskSig)
		hd[40], hd[41] = 0x01, 0x01 // MBR, 32-bit signature
	}
	path := utf16z(loader)
	fp := make([]byte, 4, 4+len(path))
	fp[0], fp[1] = 0x04, 0x04 // media device path, file path
	binary.LittleEndian.PutUint16(fp[2:], uint16(4+len(path)))
	fp = append(fp, path...)
	end := []byte{0x7f, 0xff, 0x04, 0x00}
	dp := append(append(hd, fp...), end...)

	out := make([]byte, 6)
	binary.LittleEndian.PutUint32(out, 1) // LOAD_OPTION_ACTIVE
	binary.LittleEndian.PutUint16(out[4:], uint16(len(dp)))
	out = append(out, utf16z(desc)...)
	return append(out, dp...), nil
}

func utf16z(s string) []byte {
	u := utf16.Encode([]rune(s + "\x00"))
	b := make([]byte, 2*len(u))
	for i, c := range u {
		binary.LittleEndian.PutUint16(b[2*i:], c)
	}
	return b
}

// fsImmutableFL is FS_IMMUTABLE_FL from linux/fs.h.
const fsImmutableFL = 0x00000010
