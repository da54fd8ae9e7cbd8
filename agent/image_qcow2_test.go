package agent

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// qcow2Of converts raw with qemu-img convert -O qcow2 and extra options.
func qcow2Of(t *testing.T, raw []byte, opts ...string) []byte {
	t.Helper()
	if _, err := exec.LookPath("qemu-img"); err != nil {
		t.Skip("qemu-img not installed (scripts/install-deps.sh installs qemu-utils)")
	}
	dir := t.TempDir()
	in, out := filepath.Join(dir, "disk.raw"), filepath.Join(dir, "disk.qcow2")
	if err := os.WriteFile(in, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	args := append(append([]string{"convert", "-f", "raw", "-O", "qcow2"}, opts...), in, out)
	if b, err := exec.Command("qemu-img", args...).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img %v: %v\n%s", args, err, b)
	}
	img, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// compressibleImage is testImage with text and a hole, so that qemu-img
// compresses some clusters and leaves others unallocated.
func compressibleImage(size int) []byte {
	img := testImage(size)
	copy(img[2<<20:5<<20], bytes.Repeat([]byte("ironflow writes qcow2 "), (3<<20)/22))
	clear(img[5<<20 : 6<<20])
	return img
}

func TestWriteImageQcow2(t *testing.T) {
	raw := compressibleImage(8 << 20)
	for name, opts := range map[string][]string{
		"plain":           nil,
		"zlib":            {"-c"},
		"zstd":            {"-c", "-o", "compression_type=zstd"},
		"2m clusters, v2": {"-o", "cluster_size=2M,compat=0.10"},
	} {
		t.Run(name, func(t *testing.T) {
			img := qcow2Of(t, raw, opts...)
			srv := newImageServer(t, map[string][]byte{"disk.qcow2": img})
			hw := newFileHardware(t, 16<<20)
			// Old contents everywhere: unallocated clusters must read zero.
			if err := os.WriteFile(hw.path(0), bytes.Repeat([]byte{0x5a}, 16<<20), 0o600); err != nil {
				t.Fatal(err)
			}
			_, c := startAgent(t, newFakeAPI(t), hw, nil)
			for _, format := range []string{"qcow2", ""} {
				r, err := runWriteImage(t, c, map[string]any{"image_source": srv.URL + "/disk.qcow2", "image_checksum": sha256hex(img), "image_disk_format": format}, nil)
				if err != nil {
					t.Fatalf("image_disk_format %q: %v", format, err)
				}
				if !bytes.Equal(readDisk(t, hw, len(raw)), raw) {
					t.Fatal("disk content differs from the raw image")
				}
				if !strings.Contains(string(r.CommandResult), `"image_format":"qcow2"`) {
					t.Fatalf("result %s", r.CommandResult)
				}
				if p, ok := r.Progress(); !ok || p.BytesWritten != int64(len(raw)) || p.BytesDownloaded != int64(len(img)) {
					t.Fatalf("progress %+v", p)
				}
			}
		})
	}
}

func TestWriteImageQcow2Refusals(t *testing.T) {
	raw := compressibleImage(8 << 20)
	img := qcow2Of(t, raw, "-c")
	iso := make([]byte, 64<<10)
	copy(iso[0x8001:], "CD001")
	srv := newImageServer(t, map[string][]byte{"disk.qcow2": img, "big.qcow2": qcow2Of(t, make([]byte, 32<<20)), "cd.iso": iso})
	cases := []struct {
		name, file, format, checksum, want string
	}{
		{"larger than the disk", "big.qcow2", "qcow2", "", "virtual size 33554432 bytes, disk 16777216 bytes"},
		{"declared raw", "disk.qcow2", "raw", "", "image_disk_format is raw but the image is qcow2"},
		{"wrong checksum", "disk.qcow2", "qcow2", strings.Repeat("0", 64), "image checksum mismatch"},
		{"iso detected", "cd.iso", "", sha256hex(iso), "ISO images are not written to a disk by a direct deploy"},
		{"iso declared", "cd.iso", "iso", sha256hex(iso), "ramdisk deploy interface"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, c := startAgent(t, newFakeAPI(t), newFileHardware(t, 16<<20), nil)
			ck := tc.checksum
			if ck == "" {
				ck = sha256hex(img)
			}
			_, err := runWriteImage(t, c, map[string]any{"image_source": srv.URL + "/" + tc.file, "image_checksum": ck, "image_disk_format": tc.format}, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want error %q, got %v", tc.want, err)
			}
		})
	}
}

// A qcow2 download cut short resumes with Range and still converts; a
// cancel during the write stops it with context.Canceled.
func TestStreamQcow2ResumesAndCancels(t *testing.T) {
	raw := compressibleImage(8 << 20)
	img := qcow2Of(t, raw, "-c")
	srv := newImageServer(t, map[string][]byte{"disk.qcow2": img})
	cfg := DownloadConfig{ChunkSize: 16 * pageSize, RetryDelay: time.Millisecond}.withDefaults()
	ck := expectedChecksum{Algo: "sha256", Value: sha256hex(img), Source: "test"}

	srv.cutAfter = int64(len(img)) / 3
	disk := newMemDisk(16 << 20)
	res, err := streamImageAs(context.Background(), defaultDownloadClient(), srv.URL+"/disk.qcow2", "qcow2", ck, disk, int64(len(disk.data)), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Resumes == 0 || res.Format != "qcow2" || res.Written != int64(len(raw)) || !bytes.Equal(disk.data[:len(raw)], raw) {
		t.Fatalf("result %+v, disk equal %v", res, bytes.Equal(disk.data[:len(raw)], raw))
	}

	srv.cutAfter = 0
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err = streamImageAs(ctx, defaultDownloadClient(), srv.URL+"/disk.qcow2", "qcow2", ck, newMemDisk(16<<20), 16<<20, cfg, func(written, _, _ int64) {
		if written > 1<<20 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %v", err)
	}
}
