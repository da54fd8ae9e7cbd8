package agent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// RereadPartitions implements softwareRAID: BLKRRPART, retried while the
// disk is still busy from the table just written (udev probing it).
func (h *LinuxHardware) RereadPartitions(disk string) error {
	f, err := os.OpenFile(disk, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	for i := 0; ; i++ {
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.BLKRRPART, 0)
		if errno == 0 {
			return nil
		}
		if errno != unix.EBUSY || i == 20 {
			return errno
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Mdadm implements softwareRAID: the ramdisk carries Debian's mdadm
// (agent/ramdisk).
func (h *LinuxHardware) Mdadm(ctx context.Context, args ...string) (string, error) {
	bin, err := exec.LookPath("mdadm")
	if err != nil {
		// The ramdisk's init runs without PATH; mdadm is at Debian's path
		// (agent/ramdisk DefaultMdadm).
		bin = "/sbin/mdadm"
		if _, serr := os.Stat(bin); serr != nil {
			return "", errors.New("mdadm is not installed in the agent's ramdisk")
		}
	}
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	return string(out), err
}

// MDDevices implements softwareRAID from /proc/mdstat, whose lines read
// "md0 : active raid1 vdb2[1] vda2[0]".
func (h *LinuxHardware) MDDevices() (map[string][]string, error) {
	f, err := os.Open(h.proc("mdstat"))
	if os.IsNotExist(err) {
		return nil, nil // no md driver: no arrays
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), " : ")
		if !ok || !strings.HasPrefix(name, "md") {
			continue
		}
		var members []string
		for _, w := range strings.Fields(rest) {
			if i := strings.IndexByte(w, '['); i > 0 {
				members = append(members, h.dev(w[:i]))
			}
		}
		out[h.dev(filepath.Base(name))] = members
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read mdstat: %w", err)
	}
	return out, nil
}

// PartitionDevice implements softwareRAID: the kernel's name for the
// partition, waited for until devtmpfs shows it.
func (h *LinuxHardware) PartitionDevice(disk string, n int) (string, error) {
	p := partitionPath(disk, n)
	for i := 0; i < 50; i++ {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return "", fmt.Errorf("partition %d of %s: %s did not appear after the partition table was re-read", n, disk, p)
}

// OpenShared implements raidMemberOpener: a holder disk opened without
// O_EXCL, which the kernel refuses while md holds one of its partitions.
// Only the space outside the md members is written through it (the GPT,
// the EFI system partition).
func (h *LinuxHardware) OpenShared(bd BlockDevice) (Device, error) {
	f, err := os.OpenFile(bd.Name, os.O_RDWR, 0)
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

// AddPartition implements espMirror: the kernel is told of partition n of
// disk (BLKPG_ADD_PARTITION, what partprobe does for a disk whose other
// partitions are busy, so that BLKRRPART fails) unless it shows it
// already; the partition's device is returned once devtmpfs has it.
func (h *LinuxHardware) AddPartition(disk string, n int, start, size int64) (string, error) {
	p := partitionPath(disk, n)
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	f, err := os.OpenFile(disk, os.O_RDONLY, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	part := unix.BlkpgPartition{Start: start, Length: size, Pno: int32(n)}
	arg := unix.BlkpgIoctlArg{Op: unix.BLKPG_ADD_PARTITION, Datalen: int32(unsafe.Sizeof(part)), Data: (*byte)(unsafe.Pointer(&part))}
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.BLKPG, uintptr(unsafe.Pointer(&arg))); errno != 0 && errno != unix.EBUSY {
		return "", fmt.Errorf("add partition %d of %s to the kernel: %w", n, disk, errno)
	}
	return h.PartitionDevice(disk, n)
}
