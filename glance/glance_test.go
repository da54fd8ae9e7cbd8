package glance_test

import (
	"context"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ironflow/ironflow/glance"
	"github.com/ironflow/ironflow/internal/testkit/devstack"
)

func startGlance(t *testing.T) *devstack.Glance {
	t.Helper()
	if !devstack.GlanceAvailable() {
		t.Skip(devstack.ErrNoGlance)
	}
	g, err := devstack.StartGlance(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Stop)
	return g
}

func TestImageID(t *testing.T) {
	for in, want := range map[string]string{
		"0b3e9a4c-7c4b-4f3e-8b53-2d0b6b0a9a11":          "0b3e9a4c-7c4b-4f3e-8b53-2d0b6b0a9a11",
		"glance://0b3e9a4c-7c4b-4f3e-8b53-2d0b6b0a9a11": "0b3e9a4c-7c4b-4f3e-8b53-2d0b6b0a9a11",
		"http://example.com/disk.img":                   "",
		"file:///var/lib/disk.img":                      "",
		"glance://not-a-uuid":                           "",
	} {
		got, ok := glance.ImageID(in)
		if got != want || ok != (want != "") {
			t.Errorf("ImageID(%q) = %q %v, want %q", in, got, ok, want)
		}
	}
}

// TestResolveAgainstARealGlance runs Debian's glance-api: a raw and a qcow2
// image (made by qemu-img convert -O qcow2 -c) resolve with their format and
// Glance's own sha512; each status that cannot be deployed is refused.
func TestResolveAgainstARealGlance(t *testing.T) {
	g := startGlance(t)
	ctx := context.Background()
	raw := make([]byte, 1<<20)
	copy(raw[510:], []byte{0x55, 0xaa})
	rawID, err := g.CreateImage("raw", "raw", raw)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "disk.raw"), raw, 0o644)
	if out, err := exec.Command("qemu-img", "convert", "-O", "qcow2", "-c", filepath.Join(dir, "disk.raw"), filepath.Join(dir, "disk.qcow2")).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img: %v %s", err, out)
	}
	qcow, _ := os.ReadFile(filepath.Join(dir, "disk.qcow2"))
	qcowID, err := g.CreateImage("qcow", "qcow2", qcow)
	if err != nil {
		t.Fatal(err)
	}

	c, err := glance.New(glance.Config{URL: g.URL})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		source, format string
		data           []byte
	}{{rawID, "raw", raw}, {"glance://" + qcowID, "qcow2", qcow}} {
		id, ok := glance.ImageID(tc.source)
		if !ok {
			t.Fatalf("%s is not a Glance reference", tc.source)
		}
		img, err := c.Resolve(ctx, id)
		if err != nil {
			t.Fatalf("resolve %s: %v", tc.source, err)
		}
		sum := sha512.Sum512(tc.data)
		algo, value := img.ChecksumOf()
		if img.DiskFormat != tc.format || img.ContainerFormat != "bare" || img.Size != int64(len(tc.data)) ||
			algo != "sha512" || value != hex.EncodeToString(sum[:]) {
			t.Fatalf("%s resolved to %+v", tc.source, img)
		}
		body, err := c.Download(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(body)
		body.Close()
		if string(got) != string(tc.data) {
			t.Fatalf("download of %s: %d bytes differ", tc.source, len(got))
		}
	}

	queued, _ := g.CreateQueued("queued", "raw")
	deactivated, _ := g.CreateImage("deactivated", "raw", raw)
	if err := g.Deactivate(deactivated); err != nil {
		t.Fatal(err)
	}
	deleted, _ := g.CreateImage("deleted", "raw", raw)
	if err := g.Delete(deleted); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{
		queued:                                 "Image " + queued + " is unacceptable: The image is required to be in an active state (it is queued)",
		deactivated:                            "Image " + deactivated + " is unacceptable: The image is required to be in an active state (it is deactivated)",
		deleted:                                "Image " + deleted + " could not be found",
		"6f1d0a0e-0000-4000-8000-000000000000": "Image 6f1d0a0e-0000-4000-8000-000000000000 could not be found",
	} {
		_, err := c.Resolve(ctx, id)
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("resolve %s: %v, want %q", id, err, want)
		}
		if err != nil && !errors.Is(err, glance.ErrNotFound) && !errors.Is(err, glance.ErrUnacceptable) {
			t.Errorf("resolve %s: %v is neither ErrNotFound nor ErrUnacceptable", id, err)
		}
	}
}

// Statuses the real Glance cannot be brought to from its API (killed,
// saving, pending_delete) are refused the same way.
func TestEveryStatusButActiveIsRefused(t *testing.T) {
	for _, s := range []string{"queued", "saving", "uploading", "importing", "killed", "deactivated", "deleted", "pending_delete"} {
		img := &glance.Image{ID: "x", Status: s, HashAlgo: "sha512", HashValue: "ab"}
		if err := img.Deployable(); !errors.Is(err, glance.ErrUnacceptable) {
			t.Errorf("status %s: %v", s, err)
		}
	}
	if err := (&glance.Image{ID: "x", Status: "active", HashAlgo: "sha512", HashValue: "ab"}).Deployable(); err != nil {
		t.Errorf("active: %v", err)
	}
}

func TestHTTPBasicAuthIsSent(t *testing.T) {
	var auth atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, _ := r.BasicAuth()
		auth.Store(u + ":" + p + " " + r.URL.Path)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"6f1d0a0e-0000-4000-8000-000000000000","status":"active","disk_format":"raw","container_format":"bare","size":3,"os_hash_algo":"sha512","os_hash_value":"ab","checksum":"cd"}`)
	}))
	defer srv.Close()
	c, err := glance.New(glance.Config{URL: srv.URL, Auth: glance.AuthHTTPBasic, User: "u", Password: "p"})
	if err != nil {
		t.Fatal(err)
	}
	img, err := c.Resolve(context.Background(), "6f1d0a0e-0000-4000-8000-000000000000")
	if err != nil {
		t.Fatal(err)
	}
	if got := auth.Load(); got != "u:p /v2/images/6f1d0a0e-0000-4000-8000-000000000000" {
		t.Fatalf("request %v", got)
	}
	if img.Size != 3 || img.HashValue != "ab" {
		t.Fatalf("%+v", img)
	}
	if strings.Contains(c.FileURL(img.ID), "p@") {
		t.Fatal("file URL carries the password")
	}
}

// TestWritableFormats: the agent writes bare raw and qcow2 images; any other
// container or disk format is refused, naming it.
func TestWritableFormats(t *testing.T) {
	for _, c := range []struct{ container, disk, want string }{
		{"bare", "raw", ""},
		{"bare", "qcow2", ""},
		{"ova", "vmdk", "its container_format is ova"},
		{"docker", "raw", "its container_format is docker"},
		{"", "raw", "its container_format is not set"},
		{"bare", "vhd", "its disk_format is vhd"},
		{"bare", "iso", "its disk_format is iso"},
		{"bare", "", "its disk_format is not set"},
	} {
		err := (&glance.Image{ID: "x", ContainerFormat: c.container, DiskFormat: c.disk}).Writable()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s/%s: %v", c.container, c.disk, err)
		case c.want != "" && (!errors.Is(err, glance.ErrUnacceptable) || !strings.Contains(fmt.Sprint(err), c.want)):
			t.Errorf("%s/%s: %v, want ErrUnacceptable naming %q", c.container, c.disk, err, c.want)
		}
	}
}

// TestPartition follows Ironic's is_whole_disk_image for a Glance image:
// img_type decides when set, else a kernel_id or ramdisk_id makes a
// partition image.
func TestPartition(t *testing.T) {
	for _, c := range []struct {
		img  glance.Image
		want bool
	}{
		{glance.Image{}, false},
		{glance.Image{KernelID: "k", RamdiskID: "r"}, true},
		{glance.Image{KernelID: "k"}, true},
		{glance.Image{ImageType: "partition"}, true},
		{glance.Image{ImageType: "whole-disk", KernelID: "k", RamdiskID: "r"}, false},
	} {
		if got := c.img.Partition(); got != c.want {
			t.Errorf("%+v: Partition() = %v, want %v", c.img, got, c.want)
		}
	}
}
