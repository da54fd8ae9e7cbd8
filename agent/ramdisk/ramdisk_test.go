package ramdisk_test

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"

	"github.com/ironflow/ironflow/agent/grub"
	"github.com/ironflow/ironflow/agent/kmod"
	"github.com/ironflow/ironflow/agent/ramdisk"
)

// newcEntry is one entry of a newc cpio archive.
type newcEntry struct {
	name       string
	mode       uint64
	rmaj, rmin uint64
	data       []byte
}

// readNewc parses concatenated newc archives (what the kernel accepts).
func readNewc(t *testing.T, b []byte) map[string]newcEntry {
	out := map[string]newcEntry{}
	for len(b) >= 110 {
		if string(b[:6]) != "070701" {
			// padding between concatenated archives
			b = b[1:]
			continue
		}
		field := func(i int) uint64 {
			v, err := strconv.ParseUint(string(b[6+8*i:14+8*i]), 16, 64)
			if err != nil {
				t.Fatalf("bad cpio header: %v", err)
			}
			return v
		}
		mode, size, rmaj, rmin, nameLen := field(1), field(6), field(9), field(10), field(11)
		name := string(b[110 : 110+nameLen-1])
		off := (110 + int(nameLen) + 3) &^ 3
		data := b[off : off+int(size)]
		b = b[(off+int(size)+3)&^3:]
		if name == "TRAILER!!!" {
			continue
		}
		out[name] = newcEntry{name: name, mode: mode, rmaj: rmaj, rmin: rmin, data: data}
	}
	return out
}

// smallKernelTree copies virtio_net and its dependencies, virtio_blk and an
// unrelated module from .data/kernel into a kernel directory.
func smallKernelTree(t *testing.T) (kdir, version string) {
	t.Helper()
	src := filepath.Join("..", "..", ".data", "kernel")
	v, err := os.ReadFile(filepath.Join(src, "version"))
	if err != nil {
		t.Skip("SKIP: no kernel in .data/kernel (run scripts/fetch-kernel.sh)")
	}
	version = strings.TrimSpace(string(v))
	kdir = t.TempDir()
	os.WriteFile(filepath.Join(kdir, "version"), v, 0o644)
	os.WriteFile(filepath.Join(kdir, "vmlinuz"), []byte("kernel"), 0o644)
	for _, m := range []string{"drivers/net/virtio_net.ko", "drivers/net/net_failover.ko", "net/core/failover.ko", "drivers/virtio/virtio.ko", "drivers/virtio/virtio_ring.ko", "drivers/block/virtio_blk.ko", "fs/fuse/fuse.ko"} {
		b, err := os.ReadFile(filepath.Join(src, "modules", version, "kernel", m))
		if err != nil {
			t.Skipf("SKIP: kernel module %s missing: %v", m, err)
		}
		dst := filepath.Join(kdir, "modules", version, "kernel", m)
		os.MkdirAll(filepath.Dir(dst), 0o755)
		os.WriteFile(dst, b, 0o644)
	}
	return kdir, version
}

func TestBuildReproducibleAndComplete(t *testing.T) {
	kdir, version := smallKernelTree(t)
	agentBin := filepath.Join(t.TempDir(), "agent")
	os.WriteFile(agentBin, []byte("#!agent"), 0o755)
	opts := ramdisk.Options{KernelDir: kdir, Agent: agentBin, Modules: []string{"virtio_net", "virtio_blk"}}
	var images [][]byte
	for i := range 2 {
		opts.OutDir = filepath.Join(t.TempDir(), strconv.Itoa(i))
		res, err := ramdisk.Build(opts)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(res.Initramfs)
		images = append(images, b)
		again, err := ramdisk.Build(opts)
		if err != nil || !again.Cached {
			t.Fatalf("second build with the same inputs was not cached: %+v %v", again, err)
		}
	}
	if !bytes.Equal(images[0], images[1]) {
		t.Fatal("two builds from the same inputs differ")
	}
	zr, err := gzip.NewReader(bytes.NewReader(images[0]))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(zr)
	ents := readNewc(t, raw)
	if c := ents["dev/console"]; c.mode != 0o20600 || c.rmaj != 5 || c.rmin != 1 {
		t.Fatalf("dev/console %+v", c)
	}
	if i := ents["init"]; string(i.data) != "#!agent" || i.mode&0o111 == 0 {
		t.Fatalf("init %+v", i)
	}
	prefix := "lib/modules/" + version + "/"
	for _, m := range []string{"kernel/drivers/net/virtio_net.ko", "kernel/net/core/failover.ko", "kernel/drivers/virtio/virtio_ring.ko", "kernel/drivers/block/virtio_blk.ko"} {
		if _, ok := ents[prefix+m]; !ok {
			t.Errorf("module %s missing", m)
		}
	}
	if _, ok := ents[prefix+"kernel/fs/fuse/fuse.ko"]; ok {
		t.Error("a module nobody asked for was included")
	}
	idxEnt, ok := ents[prefix+kmod.IndexFile]
	if !ok {
		t.Fatal("no module index")
	}
	idxPath := filepath.Join(t.TempDir(), "idx.json")
	os.WriteFile(idxPath, idxEnt.data, 0o644)
	ix, err := kmod.Load(idxPath)
	if err != nil {
		t.Fatal(err)
	}
	if got := ix.Match("virtio:d00000002v00001AF4"); len(got) != 1 || got[0] != "virtio_blk" {
		t.Fatalf("index match for a virtio disk: %v", got)
	}
}

// TestBuildCarriesGRUB: with GRUBDir, the ramdisk carries boot.img and the
// core images the agent installs for BIOS partition images, each with its
// prefix, and on the holders of a software RAID root; without grub-pc-bin the build fails saying so.
func TestBuildCarriesGRUB(t *testing.T) {
	if _, err := os.Stat(filepath.Join(grub.DefaultDir, grub.BootImage)); err != nil {
		t.Skip("SKIP: GRUB's i386-pc images are not installed (Debian's grub-pc-bin)")
	}
	if _, err := exec.LookPath("grub-mkimage"); err != nil {
		t.Skip("SKIP: grub-mkimage is not installed (Debian's grub-common)")
	}
	kdir, _ := smallKernelTree(t)
	agentBin := filepath.Join(t.TempDir(), "agent")
	os.WriteFile(agentBin, []byte("#!agent"), 0o755)
	opts := ramdisk.Options{KernelDir: kdir, Agent: agentBin, Modules: []string{"virtio_blk"}, OutDir: t.TempDir(), GRUBDir: grub.DefaultDir, SystemdBoot: "-"}
	res, err := ramdisk.Build(opts)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(res.Initramfs)
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(zr)
	ents := readNewc(t, raw)
	dir := strings.TrimPrefix(grub.DefaultDir, "/") + "/"
	boot, _ := os.ReadFile(filepath.Join(grub.DefaultDir, grub.BootImage))
	if !bytes.Equal(ents[dir+grub.BootImage].data, boot) {
		t.Errorf("%s%s is not grub-pc-bin's boot.img", dir, grub.BootImage)
	}
	diskboot, _ := os.ReadFile(filepath.Join(grub.DefaultDir, "diskboot.img"))
	for _, label := range []string{"msdos", "gpt", "md"} {
		core := ents[dir+grub.CoreImage(label)].data
		if len(core) < 2048 || !bytes.Equal(core[:0x100], diskboot[:0x100]) {
			t.Errorf("%s%s (%d bytes) is not a core image starting with diskboot.img", dir, grub.CoreImage(label), len(core))
		}
	}

	opts.GRUBDir, opts.OutDir = t.TempDir(), t.TempDir()
	if _, err := ramdisk.Build(opts); err == nil || !strings.Contains(err.Error(), "grub-pc-bin") {
		t.Fatalf("build without GRUB's images: %v, want an error naming grub-pc-bin", err)
	}
}

// TestBuildCarriesTheCABundle: the ramdisk carries the CA bundle where the
// agent's TLS (Go's crypto/x509) reads it, so that an https API or image
// server is verified; "-" leaves it out.
func TestBuildCarriesTheCABundle(t *testing.T) {
	kdir, _ := smallKernelTree(t)
	agentBin := filepath.Join(t.TempDir(), "agent")
	os.WriteFile(agentBin, []byte("#!agent"), 0o755)
	bundle := filepath.Join(t.TempDir(), "ca.pem")
	pem := []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
	os.WriteFile(bundle, pem, 0o644)
	entries := func(ca string) map[string]newcEntry {
		opts := ramdisk.Options{KernelDir: kdir, Agent: agentBin, Modules: []string{"virtio_blk"}, OutDir: t.TempDir(), SystemdBoot: "-", CABundle: ca}
		res, err := ramdisk.Build(opts)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(res.Initramfs)
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(zr)
		return readNewc(t, raw)
	}
	at := strings.TrimPrefix(ramdisk.DefaultCABundle, "/")
	if got := entries(bundle)[at].data; !bytes.Equal(got, pem) {
		t.Errorf("%s holds %q, want the bundle given", at, got)
	}
	if _, ok := entries("-")[at]; ok {
		t.Errorf("%s carried although the build was asked for none", at)
	}
}
