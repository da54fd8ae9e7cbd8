//go:build linux

package agent

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// dropCache writes back and drops a device's cached pages, so that a
// burn-in's verify reads the disk, not memory.
func dropCache(dev Device) {
	f, ok := dev.(fdHolder)
	if !ok {
		return
	}
	fd := int(f.Fd())
	_ = unix.Fdatasync(fd)
	_ = unix.Fadvise(fd, 0, 0, unix.FADV_DONTNEED)
}

// AvailableMemory implements MemoryReporter: MemAvailable of /proc/meminfo.
func (h *LinuxHardware) AvailableMemory() (int64, error) {
	f, err := os.Open(h.proc("meminfo"))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "MemAvailable:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("MemAvailable: %w", err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no MemAvailable in %s", h.proc("meminfo"))
}

// ZeroesInHardware implements HardwareZeroer: the kernel serves
// BLKZEROOUT with the device's own WRITE ZEROES when the queue has a
// write_zeroes limit, or with a discard when the device promises zeros
// after one (discard_zeroes_data, older kernels); otherwise it would write
// zero pages itself.
func (d *linuxDevice) ZeroesInHardware() bool {
	if d.sysDir == "" {
		return false
	}
	q := filepath.Join(d.sysDir, "queue")
	if n, _ := strconv.ParseInt(readTrim(filepath.Join(q, "write_zeroes_max_bytes")), 10, 64); n > 0 {
		return true
	}
	return readTrim(filepath.Join(q, "discard_zeroes_data")) == "1"
}

// ZeroRange implements HardwareZeroer with BLKZEROOUT.
func (d *linuxDevice) ZeroRange(off, n int64) error {
	r := [2]uint64{uint64(off), uint64(n)}
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, d.Fd(), unix.BLKZEROOUT, uintptr(unsafe.Pointer(&r[0])))
	if errno != 0 {
		return fmt.Errorf("BLKZEROOUT on %s: %w", d.Name(), errno)
	}
	return nil
}
