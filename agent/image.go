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
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// DownloadConfig tunes image downloads. Zero fields take IPA's defaults.
type DownloadConfig struct {
	// Retries is how many times a failed connection is retried (IPA: 9);
	// each retry resumes with an HTTP Range request.
	Retries int
	// RetryDelay is the pause before a retry (IPA: 10 s).
	RetryDelay time.Duration
	// StallTimeout aborts a connection that delivers nothing for this long
	// (IPA: the 60 s connection timeout).
	StallTimeout time.Duration
	// ChunkSize is the write unit (4 MiB); memory use is writeBuffers
	// chunks. A multiple of 4096 lets a block device be written with
	// O_DIRECT, and large writes keep its queue busy.
	ChunkSize int
	// DisallowMD5 refuses md5 checksums. Zero accepts them, as Ironic's
	// allow_md5_checksum does by default.
	DisallowMD5 bool
}

// Download defaults.
const (
	DefaultDownloadRetries    = 9
	DefaultDownloadRetryDelay = 10 * time.Second
	DefaultStallTimeout       = 60 * time.Second
	DefaultChunkSize          = 4 << 20
	// writeBuffers is how many chunks are in flight between the download,
	// the hash and the disk: enough to overlap the three, bounded memory.
	writeBuffers = 4
	// wipeSize is how much is zeroed at each end of a disk whose image
	// write failed, so that no half-written partition table can boot.
	wipeSize = 1 << 20
)

func (c DownloadConfig) withDefaults() DownloadConfig {
	if c.Retries == 0 {
		c.Retries = DefaultDownloadRetries
	}
	if c.Retries < 0 {
		c.Retries = 0
	}
	if c.RetryDelay == 0 {
		c.RetryDelay = DefaultDownloadRetryDelay
	}
	if c.StallTimeout == 0 {
		c.StallTimeout = DefaultStallTimeout
	}
	if c.ChunkSize == 0 {
		c.ChunkSize = DefaultChunkSize
	}
	return c
}

func defaultDownloadClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{Timeout: 60 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	tr.ResponseHeaderTimeout = 60 * time.Second
	// Images are compressed or not on purpose: never let the transport
	// gunzip behind our back (the checksum is of the file as served).
	tr.DisableCompression = true
	// HTTP/1.1 to every image server, as the image cache fetches: an
	// image is one long stream, which HTTP/2's framing and flow control
	// slow down.
	tr.ForceAttemptHTTP2 = false
	tr.Protocols = new(http.Protocols)
	tr.Protocols.SetHTTP1(true)
	if tr.TLSClientConfig != nil {
		// The clone of a default transport that has run offers h2 in ALPN.
		tr.TLSClientConfig.NextProtos = nil
	}
	return &http.Client{Transport: tr}
}

// ErrChecksumMismatch is wrapped by the error of an image whose digest
// differs from the expected one.
var ErrChecksumMismatch = errors.New("image checksum mismatch")

// permanentError is a download failure not worth retrying (HTTP 4xx).
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// resumableReader reads an HTTP resource and, when the connection breaks,
// reconnects with Range: bytes=<offset>- so the stream continues where it
// stopped; whoever reads it (hash, decompressor) sees one unbroken stream.
type resumableReader struct {
	ctx    context.Context
	hc     *http.Client
	url    string
	cfg    DownloadConfig
	body   io.ReadCloser
	cancel context.CancelFunc
	stall  *time.Timer
	offset int64
	total  int64 // -1 when unknown
	// totalBytes mirrors total for the progress reporter's goroutine.
	totalBytes atomic.Int64
	// validator pins the resource across resumes (ETag or Last-Modified).
	etag, lastMod string
	failures      int
	resumes       int
	eof           bool
}

func newResumableReader(ctx context.Context, hc *http.Client, u string, cfg DownloadConfig) *resumableReader {
	return &resumableReader{ctx: ctx, hc: hc, url: u, cfg: cfg, total: -1}
}

func (r *resumableReader) open() error {
	ctx, cancel := context.WithCancel(r.ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.url, nil)
	if err != nil {
		cancel()
		return permanentError{fmt.Errorf("image URL %s: %w", redactURL(r.url), err)}
	}
	if r.offset > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", r.offset))
		if v := r.etag; v != "" {
			req.Header.Set("If-Range", v)
		} else if v := r.lastMod; v != "" {
			req.Header.Set("If-Range", v)
		}
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		cancel()
		if untrustedCert(err) {
			return permanentError{fmt.Errorf("download %s: %s: %w", redactURL(r.url), untrustedHint, unwrapURLError(err))}
		}
		return fmt.Errorf("download %s: %w", redactURL(r.url), unwrapURLError(err))
	}
	switch {
	case r.offset == 0 && resp.StatusCode == http.StatusOK:
		r.total = resp.ContentLength
		r.totalBytes.Store(r.total)
		r.etag, r.lastMod = resp.Header.Get("ETag"), resp.Header.Get("Last-Modified")
	case r.offset > 0 && resp.StatusCode == http.StatusPartialContent:
		start, err := contentRangeStart(resp.Header.Get("Content-Range"))
		if err != nil || start != r.offset {
			resp.Body.Close()
			cancel()
			return fmt.Errorf("download %s: resume at %d answered with Content-Range %q", redactURL(r.url), r.offset, resp.Header.Get("Content-Range"))
		}
	case r.offset > 0 && resp.StatusCode == http.StatusOK:
		// The server ignores Range (or the resource changed, If-Range): skip
		// what we already have; if it changed the checksum will tell.
		if _, err := io.CopyN(io.Discard, resp.Body, r.offset); err != nil {
			resp.Body.Close()
			cancel()
			return fmt.Errorf("download %s: skip to %d after a resume without Range support: %w", redactURL(r.url), r.offset, err)
		}
	default:
		// A server's short plain-text reason (ironflow's image cache says
		// why it cannot serve) goes into the error.
		reason, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		cancel()
		err := fmt.Errorf("download %s: HTTP %d", redactURL(r.url), resp.StatusCode)
		if msg := strings.TrimSpace(string(reason)); msg != "" && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
			err = fmt.Errorf("download %s: HTTP %d: %s", redactURL(r.url), resp.StatusCode, msg)
		}
		if resp.StatusCode >= 400 && resp.StatusCode < 500 {
			return permanentError{err}
		}
		return err
	}
	r.body, r.cancel = resp.Body, cancel
	r.stall = time.AfterFunc(r.cfg.StallTimeout, cancel)
	return nil
}

func contentRangeStart(v string) (int64, error) {
	// bytes 100-199/200
	v = strings.TrimPrefix(v, "bytes ")
	s, _, ok := strings.Cut(v, "-")
	if !ok {
		return 0, fmt.Errorf("bad Content-Range %q", v)
	}
	return strconv.ParseInt(s, 10, 64)
}

func (r *resumableReader) closeBody() {
	if r.body != nil {
		r.stall.Stop()
		r.body.Close()
		r.cancel()
		r.body = nil
	}
}

func (r *resumableReader) Close() error { r.closeBody(); return nil }

func (r *resumableReader) Read(p []byte) (int, error) {
	if r.eof {
		return 0, io.EOF
	}
	for {
		if r.body == nil {
			if err := r.open(); err != nil {
				if perr := r.retry(err); perr != nil {
					return 0, perr
				}
				continue
			}
		}
		n, err := r.body.Read(p)
		r.offset += int64(n)
		if n > 0 {
			r.stall.Reset(r.cfg.StallTimeout)
			r.failures = 0
		}
		if err == io.EOF {
			if r.total >= 0 && r.offset < r.total {
				err = fmt.Errorf("connection closed at byte %d of %d: %w", r.offset, r.total, io.ErrUnexpectedEOF)
			} else {
				r.closeBody()
				r.eof = true
				return n, io.EOF
			}
		}
		if err != nil {
			r.closeBody()
			if n > 0 {
				// Deliver what we got; the next Read reconnects.
				r.failures++
				r.resumes++
				return n, nil
			}
			if perr := r.retry(err); perr != nil {
				return 0, perr
			}
			continue
		}
		return n, nil
	}
}

// retry sleeps before the next attempt or returns the error when attempts
// are exhausted, the error is permanent, or ctx ended.
func (r *resumableReader) retry(err error) error {
	if r.ctx.Err() != nil {
		return r.ctx.Err()
	}
	var perm permanentError
	if errors.As(err, &perm) {
		return err
	}
	r.failures++
	if r.failures > r.cfg.Retries {
		return fmt.Errorf("%w (gave up after %d retries)", err, r.cfg.Retries)
	}
	r.resumes++
	select {
	case <-r.ctx.Done():
		return r.ctx.Err()
	case <-time.After(r.cfg.RetryDelay):
	}
	return nil
}

// countingReader counts the downloaded (as served) bytes for progress,
// which the disk writer's goroutine reports.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// streamResult reports a finished image stream.
type streamResult struct {
	Written    int64
	Downloaded int64
	Digest     string
	Resumes    int
	Format     string
}

// progressFunc is told bytes written to disk, downloaded and the download
// total (-1 unknown).
type progressFunc func(written, downloaded, total int64)

var (
	magicGzip = []byte{0x1f, 0x8b}
	magicZstd = []byte{0x28, 0xb5, 0x2f, 0xfd}
)

// streamImage downloads url and writes it to dev from offset 0, hashing the
// file as served in the same pass and decompressing gzip or zstd on the fly.
// It fails with ErrChecksumMismatch when the digest differs from ck.
func streamImage(ctx context.Context, hc *http.Client, imageURL string, ck expectedChecksum, dev io.WriterAt, devSize int64, cfg DownloadConfig, progress progressFunc) (streamResult, error) {
	return streamImageAs(ctx, hc, imageURL, "", ck, dev, devSize, cfg, progress)
}

// streamImageAs is streamImage for an image declared of diskFormat
// (instance_info's image_disk_format, "" to detect it from the first
// bytes): see checkDiskFormat.
func streamImageAs(ctx context.Context, hc *http.Client, imageURL, diskFormat string, ck expectedChecksum, dev io.WriterAt, devSize int64, cfg DownloadConfig, progress progressFunc) (streamResult, error) {
	var res streamResult
	h, err := newHash(ck.Algo)
	if err != nil {
		return res, err
	}
	rr := newResumableReader(ctx, hc, imageURL, cfg)
	defer rr.Close()
	downloaded := &countingReader{r: rr}

	head := make([]byte, headSize)
	n, err := io.ReadFull(downloaded, head)
	// Identity, not errors.Is: a wrapped ErrUnexpectedEOF is a broken
	// download, ReadFull's own an image shorter than the magic.
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF { //nolint:errorlint // see above
		return res, fmt.Errorf("read image %s: %w", redactURL(imageURL), err)
	}
	head = head[:n]
	// A raw image is read straight into the disk writer's buffers and
	// hashed there, beside the write; a compressed one is hashed as it is
	// read, before the decompressor.
	src := io.MultiReader(bytes.NewReader(head), downloaded)
	rawHash := h
	var br *bufio.Reader
	res.Format = "raw"
	detected := detectFormat(head)
	if err := checkDiskFormat(diskFormat, detected); err != nil {
		return res, fmt.Errorf("image %s: %w", redactURL(imageURL), err)
	}
	switch {
	case detected == "qcow2":
		return streamQcow2(ctx, src, h, rr, downloaded, imageURL, ck, dev, devSize, cfg, progress)
	case bytes.HasPrefix(head, magicGzip), bytes.HasPrefix(head, magicZstd):
		br = bufio.NewReaderSize(io.TeeReader(src, h), 256<<10)
		rawHash = nil
		if bytes.HasPrefix(head, magicGzip) {
			gz, err := gzip.NewReader(br)
			if err != nil {
				return res, fmt.Errorf("open gzip image %s: %w", redactURL(imageURL), err)
			}
			defer gz.Close()
			src, res.Format = gz, "gzip"
			break
		}
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true), zstd.WithDecoderMaxWindow(128<<20))
		if err != nil {
			return res, fmt.Errorf("open zstd image %s: %w", redactURL(imageURL), err)
		}
		defer zr.Close()
		src, res.Format = zr, "zstd"
	}

	written, err := pipeToDevice(ctx, src, dev, devSize, cfg.ChunkSize, rawHash, func(w int64) {
		if progress != nil {
			progress(w, downloaded.n.Load(), rr.totalBytes.Load())
		}
	})
	res.Written, res.Resumes = written, rr.resumes
	if err != nil {
		return res, fmt.Errorf("write image %s: %w", redactURL(imageURL), err)
	}
	if br != nil {
		// The checksum covers the whole file as served: drain anything
		// after the end of the compressed stream.
		if _, err := io.Copy(io.Discard, br); err != nil {
			return res, fmt.Errorf("read the end of image %s: %w", redactURL(imageURL), err)
		}
	}
	res.Downloaded = downloaded.n.Load()
	res.Digest = hex.EncodeToString(h.Sum(nil))
	if progress != nil {
		progress(written, res.Downloaded, rr.totalBytes.Load())
	}
	if res.Digest != ck.Value {
		return res, fmt.Errorf("%w: image %s, %s from %s: expected %s, got %s", ErrChecksumMismatch, redactURL(imageURL), ck.Algo, ck.Source, ck.Value, res.Digest)
	}
	return res, nil
}

// pipeToDevice copies src to dev in chunks, reading the next chunks while
// earlier ones are written, and, when h is not nil, hashes what it writes
// on a goroutine of its own so that neither the download nor the disk
// waits for the hash. Memory is writeBuffers chunks, whatever the image's
// size.
func pipeToDevice(ctx context.Context, src io.Reader, dev io.WriterAt, devSize int64, chunk int, h hash.Hash, progress func(int64)) (int64, error) {
	type block struct {
		buf []byte
		n   int
		off int64
		// users is how many of the writer and the hasher still need buf.
		users *atomic.Int32
	}
	free := make(chan []byte, writeBuffers)
	for range writeBuffers {
		free <- alignedBuffer(chunk)
	}
	release := func(b block) {
		if b.users.Add(-1) == 0 {
			free <- b.buf
		}
	}
	// Both queues hold every buffer at most once: sends never block.
	toDisk := make(chan block, writeBuffers)
	var toHash chan block
	if h != nil {
		toHash = make(chan block, writeBuffers)
	}
	var (
		wg       sync.WaitGroup
		writeErr error
		written  int64
	)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	dw := newDiskWriter(dev, chunk)
	wg.Go(func() {
		defer dw.finish()
		for b := range toDisk {
			if writeErr == nil {
				if err := dw.writeAt(b.buf[:b.n], b.off); err != nil {
					writeErr = fmt.Errorf("write at offset %d: %w", b.off, err)
					cancel()
				} else {
					written = b.off + int64(b.n)
					progress(written)
				}
			}
			release(b)
		}
	})
	if h != nil {
		wg.Go(func() {
			for b := range toHash {
				if wctx.Err() == nil {
					h.Write(b.buf[:b.n])
				}
				release(b)
			}
		})
	}
	var off int64
	var readErr error
	for {
		var buf []byte
		select {
		case buf = <-free:
		case <-wctx.Done():
		}
		if buf == nil {
			break
		}
		n, err := io.ReadFull(src, buf)
		if n > 0 {
			if devSize > 0 && off+int64(n) > devSize {
				readErr = fmt.Errorf("image is larger than the %d-byte disk", devSize)
				free <- buf
				break
			}
			b := block{buf: buf, n: n, off: off, users: new(atomic.Int32)}
			if h != nil {
				b.users.Store(2)
				toHash <- b
			} else {
				b.users.Store(1)
			}
			toDisk <- b
			off += int64(n)
		} else {
			free <- buf
		}
		// Identity, not errors.Is: a wrapped ErrUnexpectedEOF is a broken
		// download, while ReadFull's own means "short last chunk".
		if err == io.EOF || err == io.ErrUnexpectedEOF { //nolint:errorlint // see above
			break
		}
		if err != nil {
			readErr = fmt.Errorf("read at offset %d: %w", off, err)
			break
		}
	}
	close(toDisk)
	if toHash != nil {
		close(toHash)
	}
	wg.Wait()
	if writeErr != nil {
		return written, writeErr
	}
	if readErr != nil {
		return written, readErr
	}
	if err := ctx.Err(); err != nil {
		return written, err
	}
	return written, nil
}

// pageSize aligns image buffers: O_DIRECT wants buffer addresses that are
// multiples of the disk's logical block size, at most a page.
const pageSize = 4096

// alignedBuffer returns n bytes starting at a pageSize boundary.
func alignedBuffer(n int) []byte {
	b := make([]byte, n+pageSize)
	skip := int(uintptr(unsafe.Pointer(unsafe.SliceData(b))) & (pageSize - 1))
	if skip != 0 {
		skip = pageSize - skip
	}
	return b[skip : skip+n : skip+n]
}

// wipeEnds zeroes the first and last wipeSize bytes of a device (partition
// tables, GPT backup, RAID/filesystem signatures near the end).
func wipeEnds(dev Device) error {
	size := dev.Size()
	zero := make([]byte, min(int64(wipeSize), size))
	if _, err := dev.WriteAt(zero, 0); err != nil {
		return fmt.Errorf("wipe the start of the disk: %w", err)
	}
	if size > int64(len(zero)) {
		if _, err := dev.WriteAt(zero, size-int64(len(zero))); err != nil {
			return fmt.Errorf("wipe the end of the disk: %w", err)
		}
	}
	return dev.Sync()
}
