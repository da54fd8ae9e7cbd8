//go:build linux

package agent

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

func (h *LinuxHardware) efivars() (string, error) {
	if _, err := os.Stat(h.sys("firmware", "efi")); err != nil {
		return "", ErrNotUEFI
	}
	vars := h.sys("firmware", "efi", "efivars")
	if entries, err := os.ReadDir(vars); err == nil && len(entries) > 0 {
		return vars, nil
	}
	if err := unix.Mount("efivarfs", vars, "efivarfs", 0, ""); err != nil && !errors.Is(err, unix.EBUSY) {
		return "", fmt.Errorf("mount efivarfs: %w", err)
	}
	return vars, nil
}

// UEFIBootEntries implements UEFIVariables through efivarfs.
func (h *LinuxHardware) UEFIBootEntries(context.Context) ([]UEFIBootEntry, error) {
	vars, err := h.efivars()
	if err != nil {
		return nil, err
	}
	names, err := filepath.Glob(filepath.Join(vars, "Boot[0-9A-F][0-9A-F][0-9A-F][0-9A-F]-"+efiGlobalGUID))
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []UEFIBootEntry
	for _, p := range names {
		num, err := strconv.ParseUint(strings.TrimPrefix(filepath.Base(p), "Boot")[:4], 16, 16)
		if err != nil {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil || len(b) < 4 {
			continue
		}
		desc, path, err := parseLoadOption(b[4:])
		if err != nil {
			continue
		}
		out = append(out, UEFIBootEntry{Num: uint16(num), Description: desc, DevicePath: path})
	}
	return out, nil
}

// DeleteUEFIBootEntry implements UEFIVariables: BootOrder first, so that
// the firmware never points at a missing entry, then the variable.
func (h *LinuxHardware) DeleteUEFIBootEntry(_ context.Context, num uint16) error {
	vars, err := h.efivars()
	if err != nil {
		return err
	}
	orderPath := filepath.Join(vars, "BootOrder-"+efiGlobalGUID)
	if old, err := os.ReadFile(orderPath); err == nil && len(old) >= 4 {
		var order []byte
		for i := 4; i+1 < len(old); i += 2 {
			if binary.LittleEndian.Uint16(old[i:]) != num {
				order = append(order, old[i], old[i+1])
			}
		}
		if len(order) != len(old)-4 {
			if err := writeEFIVar(orderPath, order); err != nil {
				return err
			}
		}
	}
	p := filepath.Join(vars, fmt.Sprintf("Boot%04X-%s", num, efiGlobalGUID))
	clearImmutable(p)
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", filepath.Base(p), err)
	}
	return nil
}

// clearImmutable drops the immutable flag efivarfs sets on variables.
func clearImmutable(path string) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	if flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS); err == nil && flags&fsImmutableFL != 0 {
		_ = unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, int(flags&^fsImmutableFL))
	}
}

// pstoreMagic is PSTOREFS_MAGIC from linux/magic.h.
const pstoreMagic = 0x6165676c

// ErasePstore implements PstoreEraser: /sys/fs/pstore, mounted first when
// the ramdisk has not (only under the real /sys).
func (h *LinuxHardware) ErasePstore(context.Context) ([]string, error) {
	dir := h.sys("fs", "pstore")
	if _, err := os.Stat(dir); err != nil {
		return []string{}, nil
	}
	var fs unix.Statfs_t
	if h.SysRoot == "" && unix.Statfs(dir, &fs) == nil && fs.Type != pstoreMagic {
		if err := unix.Mount("pstore", dir, "pstore", 0, ""); err != nil {
			return nil, fmt.Errorf("mount pstore: %w", err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	removed := []string{}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return removed, fmt.Errorf("remove %s: %w", e.Name(), err)
		}
		removed = append(removed, e.Name())
	}
	return removed, nil
}
