package imagecache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// followPoll is how often a Follower that caught up with the download
// looks for more.
const followPoll = 2 * time.Millisecond

// errRestarted: the download a Follower read started over (after the
// cache freed space): what it served may differ from what follows.
var errRestarted = errors.New("image cache: the download started over")

// Follower reads an image while the cache downloads it, so that the first
// node to ask for an image gets its bytes as they arrive rather than after
// the whole download (docs/bmcs-and-boot.md, "Glance images and the image
// cache"). It never hands out the last byte before the cache has verified
// the whole image against its checksum: a client that sees the end of the
// stream got what the checksum names, and a download that fails its
// checksum ends the stream with an error (the agent verifies the checksum
// of what it writes as well).
type Follower struct {
	f       *flight
	file    *os.File
	attempt int64
	pos     int64
	size    int64
	ctx     context.Context
}

// Follow starts src's download (or joins the one in flight) and returns a
// Follower of it; nil (and no error) when the image is already cached,
// when it is converted on its way into the cache (ForceRaw), or when the
// download ended before it could be followed: the caller then takes a
// Handle with Acquire, as for any cached image. A download that failed
// before its first byte is its error.
func (c *Cache) Follow(ctx context.Context, src Source) (*Follower, error) {
	if c.converts(src) {
		return nil, nil
	}
	c.mu.Lock()
	if c.entries[src.Key] != nil {
		c.mu.Unlock()
		return nil, nil
	}
	f := c.flights[src.Key]
	if f == nil {
		if err := c.recentFailureLocked(src.Key); err != nil {
			c.mu.Unlock()
			return nil, err
		}
		f = &flight{done: make(chan struct{}), trust: src.Trust}
		f.total.Store(src.Size)
		c.flights[src.Key] = f
		c.mu.Unlock()
		go c.fly(src.Key, f, func(f *flight) error { return c.fetch(src, f) })
	} else {
		c.mu.Unlock()
		if f.trust != src.Trust {
			// Another node's download with another trust: Acquire
			// sorts out whose certificate check holds.
			return nil, nil
		}
	}
	for f.part.Load() == nil {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-f.done:
			// Over before it wrote a byte: a failure is the caller's
			// answer; a success is cached, for Acquire.
			return nil, f.err
		case <-time.After(followPoll):
		}
	}
	attempt := f.attempt.Load()
	file, err := os.Open(*f.part.Load())
	if err != nil {
		return nil, nil // renamed into place meanwhile: Acquire serves it
	}
	observeAcquire(false)
	return &Follower{f: f, file: file, attempt: attempt, size: src.Size, ctx: ctx}, nil
}

// Size is the image's size when its origin said it (an OCI layer's, a
// Glance image's), 0 when unknown.
func (fl *Follower) Size() int64 { return fl.size }

// Read reads what the download wrote, waiting for more; the last byte
// only once the image is verified.
func (fl *Follower) Read(p []byte) (int, error) {
	for {
		if fl.f.attempt.Load() != fl.attempt {
			return 0, errRestarted
		}
		done := false
		select {
		case <-fl.f.done:
			done = true
		default:
		}
		w := fl.f.written.Load()
		limit := w - 1 // the last byte waits for the verification
		if done {
			if fl.f.err != nil {
				return 0, fmt.Errorf("image cache: the download failed while it was served: %w", fl.f.err)
			}
			limit = w
		}
		if fl.pos < limit {
			n := int64(len(p))
			if n > limit-fl.pos {
				n = limit - fl.pos
			}
			got, err := fl.file.ReadAt(p[:n], fl.pos)
			fl.pos += int64(got)
			if got > 0 {
				return got, nil
			}
			if err == nil || errors.Is(err, io.EOF) {
				// Shorter than written says: the file was truncated by a
				// new attempt.
				return 0, errRestarted
			}
			return 0, err
		}
		if done {
			return 0, io.EOF
		}
		select {
		case <-fl.ctx.Done():
			return 0, fl.ctx.Err()
		case <-fl.f.done:
		case <-time.After(followPoll):
		}
	}
}

// Close releases the Follower's file.
func (fl *Follower) Close() error { return fl.file.Close() }
