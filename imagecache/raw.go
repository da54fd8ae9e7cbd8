package imagecache

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/ironflow/ironflow/qcow2"
)

// Conversion to raw (Ironic's force_raw_images), when Cache.ForceRaw is
// set: a qcow2 image is downloaded and verified as any other, converted
// once by package qcow2 into an entry of its own (key <source key>#raw,
// its size the virtual size, zeros left as holes), hashed with sha256, and
// that entry is what agents are served, with its checksum at
// /cache/<node>/checksum. The qcow2 entry is removed once converted, as
// Ironic's image cache does. An image that is not qcow2 is served as it
// came. The raw entry counts for the cache's bound and is refcounted like
// any other; while it converts, the qcow2 entry is held.

const rawSuffix = "#raw"

// ErrFormat: the image's content is not the format it is declared to be.
var ErrFormat = errors.New("image format mismatch")

// converts reports whether src is converted to raw: ForceRaw, and src is
// declared qcow2 or not declared (then its first bytes tell).
func (c *Cache) converts(src Source) bool {
	d := strings.ToLower(src.DiskFormat)
	return c.ForceRaw && (d == "" || d == "qcow2")
}

func (c *Cache) acquireRaw(ctx context.Context, src Source) (*Handle, error) {
	h, passthrough, err := c.await(ctx, src.Key+rawSuffix, src.Trust, 0, func(f *flight) error { return c.toRaw(src, f) })
	if err != nil || !passthrough {
		return h, err
	}
	h, _, err = c.await(ctx, src.Key, src.Trust, src.Size, func(f *flight) error { return c.fetch(src, f) })
	return h, err
}

// toRaw is the raw entry's flight: the verified source, then its
// conversion.
func (c *Cache) toRaw(src Source, f *flight) error {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Hour)
	defer cancel()
	oh, _, err := c.await(ctx, src.Key, src.Trust, src.Size, func(of *flight) error {
		// The download's progress is the conversion's flight's too.
		err := c.fetch(src, of)
		f.total.Store(of.total.Load())
		return err
	})
	if err != nil {
		return err
	}
	defer oh.Release()
	in, err := os.Open(oh.Path())
	if err != nil {
		return fmt.Errorf("image cache: %w", err)
	}
	defer in.Close()
	magic := make([]byte, len(qcow2.Magic))
	if _, err := io.ReadFull(in, magic); err != nil || !bytes.Equal(magic, qcow2.Magic) {
		if strings.EqualFold(src.DiskFormat, "qcow2") {
			return fmt.Errorf("image cache: %w: %s: image_disk_format is qcow2 but the image has no qcow2 magic in its first bytes", ErrFormat, src.Key)
		}
		f.passthrough = true
		return nil
	}
	if _, err := in.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("image cache: %w", err)
	}
	f.total.Store(oh.Size())
	f.downloaded.Store(0)

	key := src.Key + rawSuffix
	base := c.fileBase(key)
	part := base + ".part"
	out, err := os.OpenFile(part, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o640)
	if err != nil {
		return fmt.Errorf("image cache: %w", err)
	}
	defer os.Remove(part)
	defer out.Close()
	var reserved int64
	defer func() {
		c.mu.Lock()
		c.used -= reserved
		c.mu.Unlock()
	}()
	c.Conversions.Add(1)
	res, err := qcow2.Convert(progressReader{in, &f.downloaded}, out, qcow2.Config{
		// A fresh file reads zeros where nothing is written.
		SkipZeros: true,
		// The raw disk is reserved before anything is written, evicting
		// unused entries as a download does.
		Header: func(h qcow2.Header) error {
			c.mu.Lock()
			defer c.mu.Unlock()
			if err := c.reserveLocked(h.VirtualSize); err != nil {
				return err
			}
			reserved = h.VirtualSize
			c.used += reserved
			return nil
		},
	})
	observeConversion(err)
	if err != nil {
		return fmt.Errorf("image cache: convert %s to raw: %w", src.Key, err)
	}
	size := res.Header.VirtualSize
	if err := out.Truncate(size); err != nil {
		return fmt.Errorf("image cache: %w", err)
	}
	if _, err := out.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("image cache: %w", err)
	}
	h := sha256.New()
	if _, err := io.Copy(h, out); err != nil {
		return fmt.Errorf("image cache: hash the raw image of %s: %w", src.Key, err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if err := out.Close(); err != nil {
		return fmt.Errorf("image cache: %w", err)
	}

	oh.Release()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.addLocked(part, meta{Key: key, Algo: "sha256", Hash: sum, Size: size}); err != nil {
		return err
	}
	// The qcow2 entry has served its purpose: its space goes back to the
	// cache, unless a caller holds it.
	if oe := c.entries[src.Key]; oe != nil && oe.refs == 0 {
		c.removeLocked(oe)
	}
	return nil
}
