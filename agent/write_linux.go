//go:build linux

package agent

import (
	"errors"
	"fmt"
	"io"

	"golang.org/x/sys/unix"
)

// diskWriter writes an image's chunks, in order, to a disk and steers the
// kernel so that the disk is busy while the download runs instead of after
// it. On a block device it writes with O_DIRECT: no copy into the page
// cache (the largest CPU cost of a buffered write) and nothing left to
// flush at the end. Elsewhere (a file "disk", or a device refusing
// O_DIRECT) it writes through the page cache and starts writeback of each
// chunk at once with sync_file_range, waiting for the chunk written
// writebackLag bytes before, so that dirty memory stays bounded and the
// final fsync has little left to do.
type diskWriter struct {
	dev io.WriterAt
	fd  int // -1 when dev has no file descriptor
	// direct is set while the descriptor has O_DIRECT; flags are its
	// flags before, restored by finish.
	direct bool
	flags  int
	// align is the device's logical block size: O_DIRECT offsets, lengths
	// and buffer addresses are multiples of it.
	align int
	// pending are the ranges whose writeback was started and not waited
	// for yet, oldest first.
	pending    []span
	pendingLen int64
	hints      bool
}

type span struct{ off, n int64 }

// writebackLag is how much written data may be in flight to the disk
// before the writer waits for the oldest of it: enough to keep the disk's
// queue full, little enough that a small-memory ramdisk is not filled with
// dirty pages.
const writebackLag = 64 << 20

// fdHolder is implemented by *os.File and by devices embedding it.
type fdHolder interface{ Fd() uintptr }

func newDiskWriter(dev io.WriterAt, chunk int) *diskWriter {
	w := &diskWriter{dev: dev, fd: -1}
	f, ok := dev.(fdHolder)
	if !ok {
		return w
	}
	w.fd = int(f.Fd())
	w.hints = true
	var st unix.Stat_t
	if err := unix.Fstat(w.fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFBLK {
		return w
	}
	align, err := unix.IoctlGetInt(w.fd, unix.BLKSSZGET)
	if err != nil || align <= 0 || align > pageSize || chunk%align != 0 {
		return w
	}
	flags, err := unix.FcntlInt(uintptr(w.fd), unix.F_GETFL, 0)
	if err != nil {
		return w
	}
	if _, err := unix.FcntlInt(uintptr(w.fd), unix.F_SETFL, flags|unix.O_DIRECT); err != nil {
		return w
	}
	w.direct, w.flags, w.align = true, flags, align
	return w
}

// writeAt writes b at off; b is a buffer from alignedBuffer and off a
// multiple of the chunk size, so only the image's last chunk can be
// unaligned.
func (w *diskWriter) writeAt(b []byte, off int64) error {
	if w.direct {
		head := len(b) - len(b)%w.align
		if head > 0 {
			if _, err := w.dev.WriteAt(b[:head], off); err != nil {
				if !errors.Is(err, unix.EINVAL) {
					return err
				}
				// The device or its driver refuses O_DIRECT after all:
				// write through the page cache from here on.
				w.buffered()
				return w.writeAt(b, off)
			}
		}
		if head == len(b) {
			return nil
		}
		// An unaligned tail cannot go direct.
		w.buffered()
		b, off = b[head:], off+int64(head)
	}
	if _, err := w.dev.WriteAt(b, off); err != nil {
		return err
	}
	return w.startWriteback(off, int64(len(b)))
}

// buffered drops O_DIRECT.
func (w *diskWriter) buffered() {
	if w.direct {
		_, _ = unix.FcntlInt(uintptr(w.fd), unix.F_SETFL, w.flags)
		w.direct = false
	}
}

// startWriteback asks the kernel to write [off, off+n) out now and waits
// for ranges older than writebackLag.
func (w *diskWriter) startWriteback(off, n int64) error {
	if !w.hints {
		return nil
	}
	if err := unix.SyncFileRange(w.fd, off, n, unix.SYNC_FILE_RANGE_WRITE); err != nil {
		// A descriptor without writeback (a pipe, a tmpfs file on an old
		// kernel): plain writes and the caller's final sync are enough.
		w.hints = false
		w.pending = nil
		return nil
	}
	w.pending = append(w.pending, span{off, n})
	w.pendingLen += n
	for w.pendingLen > writebackLag {
		if err := w.waitOldest(); err != nil {
			return err
		}
	}
	return nil
}

// waitOldest waits until the oldest pending range is on the disk and drops
// it from the page cache: an image is written once and not read back, and
// its pages would only push out the agent's own.
func (w *diskWriter) waitOldest() error {
	s := w.pending[0]
	w.pending = w.pending[1:]
	w.pendingLen -= s.n
	if err := unix.SyncFileRange(w.fd, s.off, s.n, unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER); err != nil {
		return fmt.Errorf("write back offset %d: %w", s.off, err)
	}
	_ = unix.Fadvise(w.fd, s.off, s.n, unix.FADV_DONTNEED)
	return nil
}

// finish restores the descriptor's flags (later writes of partition tables
// and config drives are small and unaligned); the caller's Sync makes the
// whole image durable.
func (w *diskWriter) finish() {
	w.buffered()
}
