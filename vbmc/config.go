package vbmc

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Defaults for a VM definition that leaves a field out.
const (
	DefaultMemoryMB   = 512
	DefaultCPUs       = 1
	DefaultFirmware   = FirmwareBIOS
	DefaultNetdev     = "none"
	DefaultQEMUBinary = "qemu-system-x86_64"
	// DefaultQEMUBinaryAArch64 runs the VMs whose arch is ArchAArch64
	// (Debian's qemu-system-arm).
	DefaultQEMUBinaryAArch64 = "qemu-system-aarch64"
	DefaultUsername          = "admin"
)

// Accelerator choices.
const (
	AccelAuto = "auto"
	AccelKVM  = "kvm"
	AccelTCG  = "tcg"
)

// Firmware names accepted in the configuration.
const (
	FirmwareBIOS = "bios"
	FirmwareUEFI = "uefi"
)

// Machine architectures of a VM definition.
const (
	ArchX8664   = "x86_64"
	ArchAArch64 = "aarch64"
)

// OVMF images from Debian's ovmf package, used for firmware "uefi".
var (
	OVMFCode = "/usr/share/OVMF/OVMF_CODE_4M.fd"
	OVMFVars = "/usr/share/OVMF/OVMF_VARS_4M.fd"
)

// AAVMF images from Debian's qemu-efi-aarch64 package: the UEFI firmware
// of aarch64 VMs (QEMU's virt machine).
var (
	AAVMFCode = "/usr/share/AAVMF/AAVMF_CODE.fd"
	AAVMFVars = "/usr/share/AAVMF/AAVMF_VARS.fd"
)

// Config is the vbmc configuration file (see the package documentation).
type Config struct {
	StateDir      string   `json:"state_dir"`
	Username      string   `json:"username"`
	Password      string   `json:"password"`
	MediaNetworks []string `json:"media_networks,omitempty"`
	QEMUBinary    string   `json:"qemu_binary,omitempty"`
	// QEMUBinaryAArch64 runs the aarch64 VMs (DefaultQEMUBinaryAArch64).
	QEMUBinaryAArch64 string `json:"qemu_binary_aarch64,omitempty"`
	// Accel is "auto" (KVM when /dev/kvm opens, else TCG), "kvm" or "tcg".
	Accel string `json:"accel,omitempty"`
	VMs   []VM   `json:"vms"`
	// UpdateSeconds is how long a firmware update's task runs (default
	// DefaultUpdateSeconds); BMCResetSeconds how long the service answers
	// 503 after a BMC update, as a resetting BMC does (update.go).
	UpdateSeconds   float64 `json:"update_seconds,omitempty"`
	BMCResetSeconds float64 `json:"bmc_reset_seconds,omitempty"`

	// Path is the file the configuration was loaded from; chassis_control
	// commands written for ipmi_sim point at it.
	Path string `json:"-"`

	mediaNets []netip.Prefix
}

// VM is one virtual machine acting as a bare-metal server.
type VM struct {
	Name     string `json:"name"`
	MAC      string `json:"mac"`
	Disk     string `json:"disk,omitempty"`
	DiskSize string `json:"disk_size,omitempty"`
	MemoryMB int    `json:"memory_mb,omitempty"`
	CPUs     int    `json:"cpus,omitempty"`
	Firmware string `json:"firmware,omitempty"`
	// Arch is ArchX8664 (the default: q35) or ArchAArch64: QEMU's virt
	// machine with a Cortex-A57 under TCG, UEFI (AAVMF) only.
	Arch      string   `json:"arch,omitempty"`
	Netdev    string   `json:"netdev,omitempty"`
	SerialLog string   `json:"serial_log,omitempty"`
	QEMUExtra []string `json:"qemu_extra,omitempty"`
	// HTTPBoot makes the NIC network-boot over UEFI HTTP boot only, as a
	// server whose firmware is set so: OVMF's PXE boot options are off and
	// QEMU's iPXE option ROM is not loaded (it would take the network boot
	// before the firmware's own HTTP client). UEFI firmware only.
	HTTPBoot bool `json:"http_boot,omitempty"`
	// HTTPSCACerts is a PEM file of the CAs the VM's firmware trusts for
	// HTTPS boot (a boot service's certificate): handed to OVMF as fw_cfg
	// etc/edk2/https/cacerts (pxe.EDK2CACerts). UEFI firmware only.
	HTTPSCACerts string `json:"https_cacerts,omitempty"`
	// VNCAddress ("127.0.0.1:5901") gives the VM a VGA display and QEMU's
	// VNC server (RFB, no password) on that address, the BMC side of a
	// graphical console; SerialAddress ("127.0.0.1:7001") puts its serial
	// port on a TCP listener too, one client at a time, for a serial
	// console; the IPMI BMC's serial over LAN connects to it through a
	// relay (solrelay.go, docs/console.md). Both are shown in the Redfish
	// Manager (console.go).
	VNCAddress    string `json:"vnc_address,omitempty"`
	SerialAddress string `json:"serial_address,omitempty"`
	// Drives are more disk images the Storage controller shows (with the
	// disk as Disk0) for RAID volumes (storage.go); QEMU does not attach
	// them.
	Drives []string `json:"drives,omitempty"`
}

// LoadConfig reads, defaults and validates a configuration file.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("read vbmc config: %w", err)
	}
	var cfg Config
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return Config{}, fmt.Errorf("parse vbmc config %s: %w", path, err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return Config{}, fmt.Errorf("resolve vbmc config path %s: %w", path, err)
	}
	cfg.Path = abs
	if err := cfg.normalize(); err != nil {
		return Config{}, fmt.Errorf("vbmc config %s: %w", path, err)
	}
	return cfg, nil
}

var vmNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)

// normalize fills defaults and rejects what cannot work. It is idempotent,
// so that a Config built in Go (tests of other packages) can go through it too.
func (c *Config) normalize() error {
	if c.StateDir == "" {
		return errors.New("state_dir is required")
	}
	abs, err := filepath.Abs(c.StateDir)
	if err != nil {
		return fmt.Errorf("resolve state_dir: %w", err)
	}
	c.StateDir = abs
	if c.Username == "" {
		c.Username = DefaultUsername
	}
	if c.Password == "" {
		return errors.New("password is required")
	}
	if c.QEMUBinary == "" {
		c.QEMUBinary = DefaultQEMUBinary
	}
	if c.QEMUBinaryAArch64 == "" {
		c.QEMUBinaryAArch64 = DefaultQEMUBinaryAArch64
	}
	switch c.Accel {
	case "":
		c.Accel = AccelAuto
	case AccelAuto, AccelKVM, AccelTCG:
	default:
		return fmt.Errorf("accel %q is not auto, kvm or tcg", c.Accel)
	}
	c.mediaNets = c.mediaNets[:0]
	for _, n := range c.MediaNetworks {
		p, err := netip.ParsePrefix(n)
		if err != nil {
			return fmt.Errorf("media_networks: %w", err)
		}
		c.mediaNets = append(c.mediaNets, p.Masked())
	}
	if len(c.VMs) == 0 {
		return errors.New("no vms")
	}
	seen := map[string]bool{}
	seenAddr := map[netip.AddrPort]string{}
	for i := range c.VMs {
		vm := &c.VMs[i]
		if !vmNameRE.MatchString(vm.Name) {
			return fmt.Errorf("vm %d: name %q must be letters, digits, '_', '.', '-'", i, vm.Name)
		}
		if seen[vm.Name] {
			return fmt.Errorf("vm %s: defined twice", vm.Name)
		}
		seen[vm.Name] = true
		if _, err := net.ParseMAC(vm.MAC); err != nil {
			return fmt.Errorf("vm %s: mac: %w", vm.Name, err)
		}
		if vm.MemoryMB == 0 {
			vm.MemoryMB = DefaultMemoryMB
		}
		if vm.CPUs == 0 {
			vm.CPUs = DefaultCPUs
		}
		if vm.MemoryMB < 0 || vm.CPUs < 0 {
			return fmt.Errorf("vm %s: memory_mb and cpus must be positive", vm.Name)
		}
		if vm.Firmware == "" {
			vm.Firmware = DefaultFirmware
		}
		if vm.Firmware != FirmwareBIOS && vm.Firmware != FirmwareUEFI {
			return fmt.Errorf("vm %s: firmware %q is neither %q nor %q", vm.Name, vm.Firmware, FirmwareBIOS, FirmwareUEFI)
		}
		switch vm.Arch {
		case "":
			vm.Arch = ArchX8664
		case ArchX8664:
		case ArchAArch64:
			if vm.Firmware != FirmwareUEFI {
				return fmt.Errorf("vm %s: an %s VM boots UEFI only (firmware %q)", vm.Name, ArchAArch64, FirmwareUEFI)
			}
		default:
			return fmt.Errorf("vm %s: arch %q is neither %q nor %q", vm.Name, vm.Arch, ArchX8664, ArchAArch64)
		}
		if vm.HTTPSCACerts != "" {
			if vm.Firmware != FirmwareUEFI {
				return fmt.Errorf("vm %s: https_cacerts needs firmware %q, not %q", vm.Name, FirmwareUEFI, vm.Firmware)
			}
			if _, err := edk2CACerts(vm.HTTPSCACerts); err != nil {
				return fmt.Errorf("vm %s: https_cacerts: %w", vm.Name, err)
			}
		}
		if vm.HTTPBoot && vm.Firmware != FirmwareUEFI {
			return fmt.Errorf("vm %s: http_boot needs firmware %q (UEFI HTTP boot), not %q", vm.Name, FirmwareUEFI, vm.Firmware)
		}
		if vm.Netdev == "" {
			vm.Netdev = DefaultNetdev
		}
		switch {
		case vm.Netdev == "none", vm.Netdev == "user":
		case strings.HasPrefix(vm.Netdev, "tap:") && len(vm.Netdev) > len("tap:"):
		default:
			return fmt.Errorf("vm %s: netdev %q is not tap:IFNAME, user or none", vm.Name, vm.Netdev)
		}
		if vm.Disk != "" {
			if vm.Disk, err = filepath.Abs(vm.Disk); err != nil {
				return fmt.Errorf("vm %s: resolve disk: %w", vm.Name, err)
			}
		}
		if err := checkConsoleAddresses(vm, seenAddr); err != nil {
			return err
		}
		if vm.SerialLog == "" {
			vm.SerialLog = filepath.Join(c.StateDir, vm.Name, "console.log")
		} else if vm.SerialLog, err = filepath.Abs(vm.SerialLog); err != nil {
			return fmt.Errorf("vm %s: resolve serial_log: %w", vm.Name, err)
		}
	}
	return nil
}

// vm returns the definition of the named VM.
func (c *Config) vm(name string) (VM, bool) {
	for _, vm := range c.VMs {
		if vm.Name == name {
			return vm, true
		}
	}
	return VM{}, false
}
