// Package imagecache keeps instance images on the boot HTTP service's disk
// so that a rack deploying one image downloads it once (Ironic's
// image_download_source=http). Each distinct image is fetched once, its
// checksum verified as it streams in, whatever number of deploys ask for it
// at the same time (single flight); entries are evicted least recently used
// first when the cache would exceed its size, never while a deploy uses
// them; agents are served with range requests so that they resume.
//
// Integrity: an entry's checksum is verified as it is downloaded and stored
// next to it with the size and modification time the verified file had. An
// entry whose file no longer has that size and time (it was written to), or
// that was found on disk when the process started, is hashed again before it
// is served; a mismatch removes it and downloads it again. Re-hashing every
// entry on every request would read a 10 GiB image per deploy.
package imagecache

import (
	"container/list"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ironflow/ironflow/metrics"
	"github.com/ironflow/ironflow/qcow2"
)

// ErrChecksum: downloaded data does not hash to the image's checksum.
var ErrChecksum = errors.New("image checksum mismatch")

// ErrFull: the image does not fit next to the images in use.
var ErrFull = errors.New("image cache full")

// Source is one image as the cache knows it: a stable key, the checksum its
// data must have, and how to fetch it from its origin.
type Source struct {
	Key  string // e.g. glance:<id>; equal keys are the same bytes
	Algo string // md5, sha256 or sha512
	Hash string // hex
	Size int64  // expected size if known (eviction before download), else 0
	// Fetch opens the data at its origin.
	Fetch func(ctx context.Context) (io.ReadCloser, error)
	// DiskFormat is the format the image is declared to have (Glance's
	// disk_format, instance_info/image_disk_format), "" if not declared.
	DiskFormat string
	// Trust tells apart how Fetch verifies the origin's certificate
	// (Trust.Fingerprint): a download that failed as untrusted is not
	// the answer for a request that trusts the origin otherwise.
	Trust string
}

// Progress of a download in flight.
type Progress struct {
	Downloaded, Total int64
}

type entry struct {
	key    string
	file   string
	size   int64
	algo   string
	hash   string
	verMod time.Time // mtime of the file when last verified (zero: verify before use)
	refs   int       // open handles
	elem   *list.Element
}

type flight struct {
	done        chan struct{}
	err         error
	passthrough bool
	trust       string
	downloaded  atomic.Int64
	total       atomic.Int64
	// part is the path of the file the download is written to, set
	// when it is created (attempt counts the attempts); written is what
	// of it is on the file. A Follower reads it as it grows.
	part    atomic.Pointer[string]
	attempt atomic.Int64
	written atomic.Int64
}

// Cache is a bounded directory of verified images.
type Cache struct {
	dir string
	max int64

	mu      sync.Mutex
	entries map[string]*entry
	lru     *list.List // front: most recently used
	used    int64
	flights map[string]*flight
	// failed keeps, for failedMemory, the downloads that failed in a way
	// no retry mends (the data does not match its checksum): an agent's
	// resume of a broken transfer gets the reason, not a new download.
	failed map[string]failure
	// Downloads counts origin fetches (observability, tests).
	Downloads atomic.Int64
	// ForceRaw converts qcow2 images to raw once, in the cache, and
	// serves the raw entry (Ironic's force_raw_images). Set it before
	// the first Acquire.
	ForceRaw bool
	// Conversions counts conversions to raw started (observability, tests).
	Conversions atomic.Int64
}

// meta is stored next to each entry.
type meta struct {
	Key  string `json:"key"`
	Algo string `json:"algo"`
	Hash string `json:"hash"`
	Size int64  `json:"size"`
}

// Open opens (creating) a cache in dir bounded to maxBytes (0: unbounded).
// Entries already on disk are adopted and verified before first use.
func Open(dir string, maxBytes int64) (*Cache, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("image cache: %w", err)
	}
	c := &Cache{dir: dir, max: maxBytes, entries: map[string]*entry{}, lru: list.New(), flights: map[string]*flight{}, failed: map[string]failure{}}
	metas, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	for _, mf := range metas {
		b, err := os.ReadFile(mf)
		var m meta
		if err == nil {
			err = json.Unmarshal(b, &m)
		}
		data := strings.TrimSuffix(mf, ".json") + ".img"
		st, serr := os.Stat(data)
		if err != nil || serr != nil || st.Size() != m.Size {
			os.Remove(mf)
			os.Remove(data)
			continue
		}
		e := &entry{key: m.Key, file: data, size: m.Size, algo: m.Algo, hash: m.Hash}
		e.elem = c.lru.PushBack(e)
		c.entries[m.Key] = e
		c.used += m.Size
	}
	// Half-written downloads of an earlier process.
	parts, _ := filepath.Glob(filepath.Join(dir, "*.part"))
	for _, p := range parts {
		os.Remove(p)
	}
	return c, nil
}

func (c *Cache) fileBase(key string) string {
	sum := sha256.Sum256([]byte(key))
	return filepath.Join(c.dir, hex.EncodeToString(sum[:16]))
}

// Used is the bytes the cache's entries take.
func (c *Cache) Used() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}

// Has reports whether key is cached (complete).
func (c *Cache) Has(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[key]
	return e != nil
}

// Progress reports the download of key in flight, if any, or its
// conversion to raw.
func (c *Cache) Progress(key string) (Progress, bool) {
	c.mu.Lock()
	f := c.flights[key]
	if f == nil {
		f = c.flights[key+rawSuffix]
	}
	c.mu.Unlock()
	if f == nil {
		return Progress{}, false
	}
	return Progress{Downloaded: f.downloaded.Load(), Total: f.total.Load()}, true
}

// Handle is a reference to a cached image: while it is open the image is
// not evicted.
type Handle struct {
	c    *Cache
	e    *entry
	once sync.Once
}

// Path is the verified file.
func (h *Handle) Path() string { return h.e.file }

// Key is the entry's key (the source's, or its raw conversion's).
func (h *Handle) Key() string { return h.e.key }

// Checksum is the algorithm and hex digest of the file served.
func (h *Handle) Checksum() (algo, hash string) { return h.e.algo, h.e.hash }

// Size of the image.
func (h *Handle) Size() int64 { return h.e.size }

// Release drops the reference.
func (h *Handle) Release() {
	h.once.Do(func() {
		h.c.mu.Lock()
		h.e.refs--
		h.c.mu.Unlock()
	})
}

// Acquire returns a handle on the verified image, downloading it first if
// needed. Concurrent calls for one key wait for a single download. With
// ForceRaw, a qcow2 image is served as the raw disk it describes (see
// raw.go).
func (c *Cache) Acquire(ctx context.Context, src Source) (*Handle, error) {
	key := src.Key
	if c.converts(src) {
		key += rawSuffix
	}
	hit := c.Has(key)
	var h *Handle
	var err error
	if c.converts(src) {
		h, err = c.acquireRaw(ctx, src)
	} else {
		h, _, err = c.await(ctx, src.Key, src.Trust, src.Size, func(f *flight) error { return c.fetch(src, f) })
	}
	if err == nil {
		observeAcquire(hit)
	}
	return h, err
}

// await returns a handle on key's entry, running run once, on a
// goroutine of the cache's, for all callers that find it missing at the
// same time. passthrough is run's answer that key has no entry of its own
// (an image that needs no conversion).
func (c *Cache) await(ctx context.Context, key, trust string, size int64, run func(*flight) error) (h *Handle, passthrough bool, err error) {
	for attempt := 0; ; attempt++ {
		c.mu.Lock()
		if e := c.entries[key]; e != nil {
			e.refs++
			c.lru.MoveToFront(e.elem)
			c.mu.Unlock()
			h := &Handle{c: c, e: e}
			if err := c.verify(e); err != nil {
				h.Release()
				if attempt > 0 {
					return nil, false, err
				}
				c.drop(e)
				continue // fetch again
			}
			return h, false, nil
		}
		f := c.flights[key]
		if f == nil {
			if err := c.recentFailureLocked(key); err != nil {
				c.mu.Unlock()
				return nil, false, err
			}
			f = &flight{done: make(chan struct{}), trust: trust}
			f.total.Store(size)
			c.flights[key] = f
			c.mu.Unlock()
			go c.fly(key, f, run)
		} else {
			c.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return nil, false, ctx.Err()
		case <-f.done:
		}
		if f.err != nil {
			// Another node's download failed on a certificate its
			// image_verify_ca does not trust: fetch with ours.
			if errors.Is(f.err, ErrUntrusted) && f.trust != trust && attempt == 0 {
				continue
			}
			return nil, false, f.err
		}
		if f.passthrough {
			return nil, true, nil
		}
	}
}

// fly runs one flight to its end.
func (c *Cache) fly(key string, f *flight, run func(*flight) error) {
	err := run(f)
	c.mu.Lock()
	delete(c.flights, key)
	if permanent(err) {
		c.failed[key] = failure{err: err, at: time.Now()}
	}
	f.err = err
	c.mu.Unlock()
	close(f.done)
}

// verify re-hashes an entry whose file changed since it was verified.
func (c *Cache) verify(e *entry) error {
	st, err := os.Stat(e.file)
	if err != nil {
		return fmt.Errorf("image cache: %s: %w", e.key, err)
	}
	c.mu.Lock()
	ok := !e.verMod.IsZero() && st.ModTime().Equal(e.verMod) && st.Size() == e.size
	c.mu.Unlock()
	if ok {
		return nil
	}
	f, err := os.Open(e.file)
	if err != nil {
		return fmt.Errorf("image cache: %s: %w", e.key, err)
	}
	defer f.Close()
	h, err := newHash(e.algo)
	if err != nil {
		return err
	}
	n, err := io.Copy(h, f)
	if err != nil {
		return fmt.Errorf("image cache: read %s: %w", e.key, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); n != e.size || got != e.hash {
		return fmt.Errorf("image cache: entry %s is corrupt (%s %s, expected %s): %w", e.key, e.algo, got, e.hash, ErrChecksum)
	}
	c.mu.Lock()
	e.verMod = st.ModTime()
	c.mu.Unlock()
	return nil
}

// drop removes an entry (a corrupt one: even if in use, its bytes are bad).
func (c *Cache) drop(e *entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries[e.key] != e {
		return
	}
	c.removeLocked(e)
}

func (c *Cache) removeLocked(e *entry) {
	delete(c.entries, e.key)
	c.lru.Remove(e.elem)
	c.used -= e.size
	os.Remove(e.file)
	os.Remove(strings.TrimSuffix(e.file, ".img") + ".json")
}

// evictUnusedLocked removes every entry no deploy uses and returns the
// bytes it freed.
func (c *Cache) evictUnusedLocked() int64 {
	var freed int64
	for el := c.lru.Back(); el != nil; {
		e := el.Value.(*entry)
		el = el.Prev()
		if e.refs == 0 {
			freed += e.size
			c.removeLocked(e)
		}
	}
	return freed
}

// reserveLocked evicts unused entries, least recently used first, until n
// more bytes fit.
func (c *Cache) reserveLocked(n int64) error {
	if c.max <= 0 {
		return nil
	}
	if n > c.max {
		return fmt.Errorf("%w: the image is %d bytes, the cache holds %d (--image-cache-size)", ErrFull, n, c.max)
	}
	for el := c.lru.Back(); el != nil && c.used+n > c.max; {
		e := el.Value.(*entry)
		el = el.Prev()
		if e.refs > 0 {
			continue
		}
		c.removeLocked(e)
	}
	if c.used+n > c.max {
		return fmt.Errorf("%w: %d bytes needed, %d of %d bytes are images in use", ErrFull, n, c.used, c.max)
	}
	return nil
}

// diskFullError: the cache's disk had no space left for a download (the
// part file is removed with it).
type diskFullError struct {
	written int64
	err     error
}

func (e *diskFullError) Error() string { return e.err.Error() }
func (e *diskFullError) Unwrap() error { return e.err }

// fetch downloads src into the cache. A disk fuller than --image-cache-size
// says (it is shared, or the size is too large for it) costs the images no
// deploy uses, and the download runs once more if that freed anything;
// otherwise the answer is ErrFull, with what was tried.
func (c *Cache) fetch(src Source, f *flight) error {
	err := c.fetchOnce(src, f)
	var full *diskFullError
	if !errors.As(err, &full) {
		return err
	}
	c.mu.Lock()
	freed := c.evictUnusedLocked()
	c.mu.Unlock()
	if freed > 0 {
		f.downloaded.Store(0)
		if err = c.fetchOnce(src, f); !errors.As(err, &full) {
			return err
		}
		c.mu.Lock()
		freed += c.evictUnusedLocked()
		c.mu.Unlock()
	}
	return fmt.Errorf("%w: no space left on the disk of %s for %s after %d bytes, %d bytes of unused images evicted: %w",
		ErrFull, c.dir, src.Key, full.written, freed, full.err)
}

func (c *Cache) fetchOnce(src Source, f *flight) error {
	h, err := newHash(src.Algo)
	if err != nil {
		return err
	}
	want := strings.ToLower(src.Hash)
	c.mu.Lock()
	err = c.reserveLocked(src.Size)
	reserved := int64(0)
	if err == nil && src.Size > 0 {
		reserved = src.Size
		c.used += reserved // held for the download in flight
	}
	c.mu.Unlock()
	if err != nil {
		return err
	}
	defer func() {
		c.mu.Lock()
		c.used -= reserved
		c.mu.Unlock()
	}()
	// The download belongs to the cache, not to the first requester: a
	// cancelled deploy does not fail the others waiting on it.
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Hour)
	defer cancel()
	c.Downloads.Add(1)
	body, err := src.Fetch(ctx)
	if err != nil {
		return fmt.Errorf("image cache: fetch %s: %w", src.Key, err)
	}
	defer body.Close()
	base := c.fileBase(src.Key)
	part := base + ".part"
	out, err := os.OpenFile(part, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o640)
	if err != nil {
		return fmt.Errorf("image cache: %w", err)
	}
	defer os.Remove(part)
	f.written.Store(0)
	f.attempt.Add(1)
	f.part.Store(&part)
	n, err := copyHashing(countingWriter{out, &f.written}, h, progressReader{body, &f.downloaded})
	metrics.ImageCacheDownloadedBytes.Add(float64(n))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, syscall.ENOSPC) {
		return &diskFullError{written: n, err: err}
	}
	if err != nil {
		return fmt.Errorf("image cache: download %s: %w", src.Key, err)
	}
	if testHookDownloaded != nil {
		testHookDownloaded()
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return fmt.Errorf("image cache: %w: %s: %s of the downloaded image is %s, expected %s", ErrChecksum, src.Key, src.Algo, got, want)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if extra := n - reserved; extra > 0 {
		if err := c.reserveLocked(extra); err != nil {
			return err
		}
	}
	return c.addLocked(part, meta{Key: src.Key, Algo: src.Algo, Hash: want, Size: n})
}

// addLocked makes the verified file part the entry m describes: renamed
// into place, its meta written next to it, counted and most recently used.
func (c *Cache) addLocked(part string, m meta) error {
	base := c.fileBase(m.Key)
	if err := os.Rename(part, base+".img"); err != nil {
		return fmt.Errorf("image cache: %w", err)
	}
	mb, _ := json.Marshal(m)
	if err := os.WriteFile(base+".json", mb, 0o640); err != nil {
		os.Remove(base + ".img")
		if errors.Is(err, syscall.ENOSPC) {
			return &diskFullError{written: m.Size, err: err}
		}
		return fmt.Errorf("image cache: %w", err)
	}
	st, err := os.Stat(base + ".img")
	if err != nil {
		return fmt.Errorf("image cache: %w", err)
	}
	e := &entry{key: m.Key, file: base + ".img", size: m.Size, algo: m.Algo, hash: m.Hash, verMod: st.ModTime()}
	e.elem = c.lru.PushFront(e)
	c.entries[m.Key] = e
	c.used += m.Size
	return nil
}

// Chunks of a download: copyHashing hashes one while the next is read and
// written.
const (
	copyChunk = 1 << 20
	copyDepth = 4
)

// copyHashing copies body to out and feeds h the same bytes on another
// goroutine: hashing (sha256 costs about as much as reading and writing
// together) overlaps the reading and the writing, so a download runs at
// the pace of the slower of the two rather than of their sum.
func copyHashing(out io.Writer, h hash.Hash, body io.Reader) (int64, error) {
	free := make(chan []byte, copyDepth)
	for range copyDepth {
		free <- make([]byte, copyChunk)
	}
	full := make(chan []byte, copyDepth)
	hashed := make(chan struct{})
	go func() {
		defer close(hashed)
		for b := range full {
			h.Write(b)
			free <- b[:cap(b)]
		}
	}()
	var n int64
	var err error
	for {
		buf := <-free
		m := 0
		var rerr error
		for m < len(buf) && rerr == nil {
			var k int
			k, rerr = body.Read(buf[m:])
			m += k
		}
		if m > 0 {
			if _, werr := out.Write(buf[:m]); werr != nil {
				err = werr
				break
			}
			n += int64(m)
			full <- buf[:m]
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			err = rerr
			break
		}
	}
	close(full)
	<-hashed
	return n, err
}

// failedMemory is how long a download's permanent failure answers for
// its key without a new download.
const failedMemory = time.Minute

// failure is a download that failed for good, and when.
type failure struct {
	err error
	at  time.Time
}

// permanent reports a failure that fetching again would not mend: the
// bytes do not match their checksum, or are not the declared format.
func permanent(err error) bool {
	return errors.Is(err, ErrChecksum) || errors.Is(err, ErrFormat) ||
		errors.Is(err, qcow2.ErrCorrupt) || errors.Is(err, qcow2.ErrUnsupported)
}

// recentFailureLocked is key's permanent failure of the last
// failedMemory, nil when there is none.
func (c *Cache) recentFailureLocked(key string) error {
	f, ok := c.failed[key]
	if !ok {
		return nil
	}
	if time.Since(f.at) > failedMemory {
		delete(c.failed, key)
		return nil
	}
	return f.err
}

// testHookDownloaded, set by tests only, runs between a download's last
// byte and its verification.
var testHookDownloaded func()

// countingWriter counts what reached the file.
type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n.Add(int64(n))
	return n, err
}

type progressReader struct {
	r io.Reader
	n *atomic.Int64
}

func (p progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.n.Add(int64(n))
	return n, err
}

func newHash(algo string) (hash.Hash, error) {
	switch strings.ToLower(algo) {
	case "md5":
		return md5.New(), nil
	case "sha256":
		return sha256.New(), nil
	case "sha512":
		return sha512.New(), nil
	}
	return nil, fmt.Errorf("image cache: unsupported checksum algorithm %q (md5, sha256, sha512)", algo)
}

// pin takes a reference on a cached key without verifying it again.
func (c *Cache) pin(key string) (*Handle, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[key]
	if e == nil {
		return nil, fmt.Errorf("image cache: %s is not cached", key)
	}
	e.refs++
	return &Handle{c: c, e: e}, nil
}
