//go:build linux

// Package boot is what ironflow's agent does as PID 1 of its ramdisk before
// the agent proper starts: mount the kernel filesystems, load the kernel
// modules for the hardware present, make sure the kernel's random pool is
// ready, and bring up the network: with DHCP, or with the node's
// network_data read from the virtual CD it booted from (netdata.go). It
// never writes to disks; it reads only a CD-ROM drive's ISO.
package boot

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ironflow/ironflow/agent/kmod"
)

// Named defaults.
const (
	// moduleRounds bounds how often device scanning repeats while newly
	// loaded drivers expose new devices (PCI → virtio → net).
	moduleRounds = 5
	// EntropyWarnEvery is how often the agent says it still waits for entropy.
	EntropyWarnEvery = 10 * time.Second
)

// MountBasics mounts /proc, /sys, /dev (devtmpfs), /run and /tmp.
func MountBasics() error {
	mounts := []struct {
		src, dst, fstype string
		flags            uintptr
		data             string
	}{
		{"proc", "/proc", "proc", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, ""},
		{"sysfs", "/sys", "sysfs", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, ""},
		{"devtmpfs", "/dev", "devtmpfs", unix.MS_NOSUID, "mode=0755"},
		{"tmpfs", "/run", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=0755"},
		{"tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=1777"},
	}
	var errs []error
	for _, m := range mounts {
		if err := os.MkdirAll(m.dst, 0o755); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := unix.Mount(m.src, m.dst, m.fstype, m.flags, m.data); err != nil && !errors.Is(err, unix.EBUSY) {
			errs = append(errs, fmt.Errorf("mount %s on %s: %w", m.fstype, m.dst, err))
		}
	}
	return errors.Join(errs...)
}

// KernelRelease is uname -r.
func KernelRelease() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

// LoadModules loads the modules for the devices present, then always-wanted
// ones (efivarfs on UEFI machines, vfat, IPMI device interface).
func LoadModules(log *slog.Logger) error {
	dir := filepath.Join("/lib/modules", KernelRelease())
	l, err := kmod.NewLoader(dir, log)
	if err != nil {
		return err
	}
	loaded, err := l.LoadForDevices("/sys", moduleRounds)
	var extra []string
	// md_mod and the RAID personalities: the agent's software RAID steps
	// (mdadm in the ramdisk cannot modprobe them).
	for _, m := range []string{"efivarfs", "vfat", "nls_cp437", "nls_ascii", "ipmi_devintf", "ipmi_si", "md_mod", "raid0", "raid1", "raid10", "raid456"} {
		if _, ok := l.Index.Modules[m]; ok {
			extra = append(extra, m)
		}
	}
	err = errors.Join(err, l.Load(extra...))
	log.Info("kernel modules loaded", "for_devices", loaded, "extra", extra)
	if _, serr := os.Stat("/sys/firmware/efi/efivars"); serr == nil {
		if merr := unix.Mount("efivarfs", "/sys/firmware/efi/efivars", "efivarfs", 0, ""); merr != nil && !errors.Is(merr, unix.EBUSY) {
			log.Warn("mount efivarfs failed", "err", merr)
		}
	}
	return err
}

// WaitForEntropy returns once getrandom(2) would not block, saying so on
// the console while it waits: without a hardware RNG (virtio-rng, RDRAND)
// the kernel's pool can take minutes under emulation, and TLS, DHCP
// transaction IDs and UUIDs all need it.
func WaitForEntropy(log *slog.Logger) {
	buf := make([]byte, 1)
	if _, err := unix.Getrandom(buf, unix.GRND_NONBLOCK); err == nil {
		return
	}
	log.Warn("waiting for the kernel random pool (give the machine a hardware RNG: virtio-rng or RDRAND)")
	done := make(chan struct{})
	go func() {
		_, _ = unix.Getrandom(buf, 0)
		close(done)
	}()
	t := time.NewTicker(EntropyWarnEvery)
	defer t.Stop()
	start := time.Now()
	for {
		select {
		case <-done:
			log.Info("kernel random pool ready", "waited", time.Since(start).Round(time.Millisecond))
			return
		case <-t.C:
			log.Warn("still waiting for the kernel random pool", "waited", time.Since(start).Round(time.Second))
		}
	}
}

// Cmdline parses /proc/cmdline into key → value ("" for bare flags).
func Cmdline() map[string]string {
	b, _ := os.ReadFile("/proc/cmdline")
	return ParseCmdline(string(b))
}

// ParseCmdline parses a kernel command line (double quotes group values).
func ParseCmdline(s string) map[string]string {
	out := map[string]string{}
	var cur strings.Builder
	inQuote := false
	flush := func() {
		if cur.Len() == 0 {
			return
		}
		k, v, _ := strings.Cut(cur.String(), "=")
		out[k] = v
		cur.Reset()
	}
	for _, r := range s {
		switch {
		case r == '"':
			inQuote = !inQuote
		case (r == ' ' || r == '\n' || r == '\t') && !inQuote:
			flush()
		default:
			cur.WriteRune(r)
		}
	}
	flush()
	return out
}
