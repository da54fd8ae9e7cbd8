package imagecache

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestBootFileID follows Ironic's build_instance_info_for_deploy:
// instance_info/kernel and ramdisk win (a URL there is the agent's own,
// a Glance UUID is cached), else a partition Glance image's kernel_id and
// ramdisk_id; a whole-disk image has none.
func TestBootFileID(t *testing.T) {
	const img, k, r, other = "0b3e9a4c-7c4b-4f3e-8b53-2d0b6b0a9a11", "1b3e9a4c-7c4b-4f3e-8b53-2d0b6b0a9a11", "2b3e9a4c-7c4b-4f3e-8b53-2d0b6b0a9a11", "3b3e9a4c-7c4b-4f3e-8b53-2d0b6b0a9a11"
	part := Origin{GlanceID: img, Partition: true, KernelID: k, RamdiskID: r}
	for _, c := range []struct {
		name                string
		ii                  map[string]any
		o                   Origin
		wantKernel, wantRam string
	}{
		{"glance partition image", map[string]any{}, part, k, r},
		{"instance_info image_type whole-disk wins", map[string]any{"image_type": "whole-disk"}, part, "", ""},
		{"instance_info kernel URL is the agent's", map[string]any{"kernel": "http://x/vmlinuz"}, part, "", r},
		{"instance_info kernel Glance UUID", map[string]any{"kernel": "glance://" + other}, part, other, r},
		{"whole-disk Glance image", map[string]any{}, Origin{GlanceID: img}, "", ""},
		{"URL image with Glance kernel", map[string]any{"kernel": other}, Origin{URL: "http://x/root.img"}, other, ""},
	} {
		if got := BootFileID(c.ii, c.o, PartKernel); got != c.wantKernel {
			t.Errorf("%s: kernel %q, want %q", c.name, got, c.wantKernel)
		}
		if got := BootFileID(c.ii, c.o, PartRamdisk); got != c.wantRam {
			t.Errorf("%s: ramdisk %q, want %q", c.name, got, c.wantRam)
		}
	}
}

// TestBootFilesAreServedAndHeldBesideTheImage: GET /cache/{node}/kernel is
// served from the cache under a lease of its own, which does not replace
// the image's; Release drops both.
func TestBootFilesAreServedAndHeldBesideTheImage(t *testing.T) {
	const size = 256 << 10
	o := newOrigin(t, map[string][]byte{"img": randBytes(size), "vmlinuz": randBytes(size)})
	c, _ := Open(t.TempDir(), 0)
	const node = "6f1d0a0e-0000-4000-8000-0000000000dd"
	s := &Server{Cache: c,
		Resolve: func(context.Context, string) (Source, error) { return o.source("img"), nil },
		ResolveBootFile: func(_ context.Context, _, part string) (Source, error) {
			if part != PartKernel {
				return Source{}, errors.New("no ramdisk")
			}
			return o.source("vmlinuz"), nil
		}}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	if code, _ := get(t, hs.URL+"/cache/"+node+"/image"); code != 200 {
		t.Fatalf("image: %d", code)
	}
	code, body := get(t, hs.URL+"/cache/"+node+"/kernel")
	if code != 200 || !bytes.Equal(body, o.images["vmlinuz"]) {
		t.Fatalf("kernel: %d, %d bytes, want 200 and the origin's %d bytes", code, len(body), size)
	}
	if code, _ := get(t, hs.URL+"/cache/"+node+"/ramdisk"); code != http.StatusNotFound {
		t.Errorf("ramdisk the resolver refuses: %d, want 404", code)
	}
	s.mu.Lock()
	img, kernel := s.leases[node], s.leases[node+"/"+PartKernel]
	s.mu.Unlock()
	if img == nil || kernel == nil || img.key != "test:img" || kernel.key != "test:vmlinuz" {
		t.Fatalf("leases: image %v, kernel %v; want both held", img, kernel)
	}
	s.Release(node)
	s.mu.Lock()
	n := len(s.leases)
	s.mu.Unlock()
	if n != 0 {
		t.Errorf("%d leases left after Release", n)
	}
}
