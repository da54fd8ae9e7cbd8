package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/ironflow/ironflow/qcow2"
)

// headSize is how much of an image is read to tell its format: an ISO 9660
// volume descriptor's "CD001" lies at 0x8001.
const headSize = 0x8006

var magicISO = []byte("CD001")

// detectFormat tells an image's format from its first bytes: "qcow2",
// "gzip", "zstd", "iso" or "raw".
func detectFormat(head []byte) string {
	switch {
	case bytes.HasPrefix(head, qcow2.Magic):
		return "qcow2"
	case bytes.HasPrefix(head, magicGzip):
		return "gzip"
	case bytes.HasPrefix(head, magicZstd):
		return "zstd"
	case len(head) >= headSize && bytes.Equal(head[0x8001:headSize], magicISO):
		return "iso"
	}
	return "raw"
}

var errISO = errors.New("ISO images are not written to a disk by a direct deploy: deploy them with the ramdisk deploy interface (instance_info/boot_iso)")

// checkDeclaredFormat refuses, before anything is downloaded, an
// image_disk_format (Ironic's disk_format names) the agent does not write.
func checkDeclaredFormat(declared string) error {
	switch strings.ToLower(declared) {
	case "", "raw", "gpt", "qcow2":
		return nil
	case "iso":
		return errISO
	}
	return fmt.Errorf("disk_format %q is not supported: ironflow's agent writes raw images (raw, or gzip/zstd-compressed raw) and qcow2 images", declared)
}

// checkDiskFormat compares the declared format with the detected one. A
// declared format must match the content (as IPA's format inspection
// does since CVE-2024-44082: a "raw" image that is really qcow2 could name
// a backing file), except that raw may arrive gzip- or zstd-compressed.
// An ISO is refused unless declared raw (a hybrid ISO written as a disk).
func checkDiskFormat(declared, detected string) error {
	if err := checkDeclaredFormat(declared); err != nil {
		return err
	}
	switch d := strings.ToLower(declared); {
	case d == "" && detected == "iso":
		return fmt.Errorf("%w (the image has an ISO 9660 volume descriptor at offset 0x8001)", errISO)
	case d == "qcow2" && detected != "qcow2":
		return fmt.Errorf("image_disk_format is qcow2 but the image is %s (no qcow2 magic in its first bytes)", detected)
	case (d == "raw" || d == "gpt") && detected == "qcow2":
		return fmt.Errorf("image_disk_format is %s but the image is qcow2 (its first bytes are QEMU's qcow2 magic): set image_disk_format to qcow2", d)
	}
	return nil
}

// streamQcow2 writes a qcow2 image to dev as it downloads, through the
// qcow2 package's in-order conversion (see its documentation for the
// memory bound), hashing the file as received. src is the whole stream
// (first bytes included), h the image's checksum.
func streamQcow2(ctx context.Context, src io.Reader, h hash.Hash, rr *resumableReader, downloaded *countingReader, imageURL string, ck expectedChecksum, dev io.WriterAt, devSize int64, cfg DownloadConfig, progress progressFunc) (streamResult, error) {
	res := streamResult{Format: "qcow2"}
	sink := newQcow2Sink(ctx, dev, cfg.ChunkSize, func(w int64) {
		if progress != nil {
			progress(w, downloaded.n.Load(), rr.totalBytes.Load())
		}
	})
	in := bufio.NewReaderSize(io.TeeReader(src, h), 256<<10)
	conv, err := qcow2.Convert(in, sink, qcow2.Config{MaxSize: devSize, Zero: sink.zero})
	if ferr := sink.close(); err == nil {
		err = ferr
	}
	res.Written, res.Resumes = sink.written.Load(), rr.resumes
	if err == nil {
		if err = ctx.Err(); err == nil && conv.Header.VirtualSize != res.Written {
			err = fmt.Errorf("wrote %d bytes of a %d-byte virtual disk", res.Written, conv.Header.VirtualSize)
		}
	}
	if err != nil {
		return res, fmt.Errorf("write qcow2 image %s: %w", redactURL(imageURL), err)
	}
	res.Downloaded = downloaded.n.Load()
	res.Digest = hex.EncodeToString(h.Sum(nil))
	if progress != nil {
		progress(res.Written, res.Downloaded, rr.totalBytes.Load())
	}
	if res.Digest != ck.Value {
		return res, fmt.Errorf("%w: image %s, %s from %s: expected %s, got %s", ErrChecksumMismatch, redactURL(imageURL), ck.Algo, ck.Source, ck.Value, res.Digest)
	}
	return res, nil
}

// qcow2Sink takes the converter's writes (guest offsets in the order of
// the file, contiguous runs of up to 4 MiB) and hands them to a writer
// goroutine through writeBuffers aligned chunks, so that the download and
// the disk overlap and a block device is written with O_DIRECT, as raw
// images are (pipeToDevice).
type qcow2Sink struct {
	ctx      context.Context
	dev      io.WriterAt
	chunk    int
	free     chan []byte
	toDisk   chan qcow2Block
	wg       sync.WaitGroup
	mu       sync.Mutex
	err      error
	written  atomic.Int64
	progress func(int64)
	// fastZero is cleared when the device cannot zero a range itself.
	fastZero bool
}

// zeroPiece is the most one zeroRange call zeroes.
const zeroPiece = 256 << 20

type qcow2Block struct {
	buf []byte
	n   int
	off int64
}

func newQcow2Sink(ctx context.Context, dev io.WriterAt, chunk int, progress func(int64)) *qcow2Sink {
	s := &qcow2Sink{ctx: ctx, dev: dev, chunk: chunk, progress: progress, fastZero: true,
		free: make(chan []byte, writeBuffers), toDisk: make(chan qcow2Block, writeBuffers)}
	for range writeBuffers {
		s.free <- alignedBuffer(chunk)
	}
	dw := newDiskWriter(dev, chunk)
	s.wg.Go(func() {
		defer dw.finish()
		for b := range s.toDisk {
			if s.failed() == nil {
				if err := dw.writeAt(b.buf[:b.n], b.off); err != nil {
					s.fail(fmt.Errorf("write at offset %d: %w", b.off, err))
				} else {
					s.progress(s.written.Add(int64(b.n)))
				}
			}
			s.free <- b.buf
		}
	})
	return s
}

func (s *qcow2Sink) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
}

func (s *qcow2Sink) failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// put queues n bytes at off, copied from p, or zeros when p is nil.
func (s *qcow2Sink) put(p []byte, off, n int64) error {
	for n > 0 {
		if err := s.failed(); err != nil {
			return err
		}
		var buf []byte
		select {
		case buf = <-s.free:
		case <-s.ctx.Done():
			return s.ctx.Err()
		}
		k := int(min(n, int64(len(buf))))
		if p != nil {
			copy(buf, p[:k])
			p = p[k:]
		} else {
			clear(buf[:k])
		}
		s.toDisk <- qcow2Block{buf: buf, n: k, off: off}
		off, n = off+int64(k), n-int64(k)
	}
	return nil
}

func (s *qcow2Sink) WriteAt(p []byte, off int64) (int, error) {
	if err := s.put(p, off, int64(len(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// zero zeroes a range the image leaves unallocated or marks zero: by the
// device itself where it can (BLKZEROOUT on a block device, a punched hole
// in a file), else by writing zeros.
func (s *qcow2Sink) zero(off, n int64) error {
	// In pieces, so that progress moves and a cancel is seen while a
	// disk without WRITE ZEROES is zeroed by the kernel.
	for s.fastZero && n > 0 {
		if err := s.failed(); err != nil {
			return err
		}
		if err := s.ctx.Err(); err != nil {
			return err
		}
		k := min(n, zeroPiece)
		if !zeroRange(s.dev, off, k) {
			s.fastZero = false
			break
		}
		s.progress(s.written.Add(k))
		off, n = off+k, n-k
	}
	return s.put(nil, off, n)
}

// close waits for the queued writes and returns the first write error.
func (s *qcow2Sink) close() error {
	close(s.toDisk)
	s.wg.Wait()
	return s.failed()
}
