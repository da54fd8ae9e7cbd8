//go:build linux

package agent

import (
	"io"
	"unsafe"

	"golang.org/x/sys/unix"
)

// zeroRange asks the device to zero [off, off+n) itself: BLKZEROOUT on a
// block device (the kernel uses the disk's WRITE ZEROES where it has one),
// a hole punched in a regular file. It reports false when it cannot, and
// the caller writes zeros.
func zeroRange(dev io.WriterAt, off, n int64) bool {
	f, ok := dev.(fdHolder)
	if !ok || off%512 != 0 || n%512 != 0 {
		return false
	}
	fd := int(f.Fd())
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFBLK:
		r := [2]uint64{uint64(off), uint64(n)}
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.BLKZEROOUT, uintptr(unsafe.Pointer(&r[0])))
		return errno == 0
	case unix.S_IFREG:
		return unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n) == nil
	}
	return false
}
