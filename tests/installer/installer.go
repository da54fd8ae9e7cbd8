// Package installer builds a small initramfs that plays anaconda's part of
// an anaconda deploy for ironflow's VM tests: it fetches the kickstart named
// by inst.ks= on the kernel command line, runs its %pre, writes the liveimg
// image to the first virtio disk, runs %post (%onerror on any failure), and
// reboots or powers off. The heartbeats are the kickstart's own curl calls,
// served by a curl stand-in over busybox wget, so the kickstart ironflow
// renders is exercised as written.
//
// It is test equipment: it trusts its kickstart, speaks plain HTTP only
// (busybox wget has no TLS) and knows virtio hardware only. It writes
// nothing but its output file.
package installer

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/cavaliergopher/cpio"
	"github.com/klauspost/compress/zstd"
)

// Console markers the installer prints, one line each, so tests can follow
// and assert on it.
const (
	Marker        = "IRONFLOW-INSTALLER"
	MarkerStart   = Marker + " start"
	MarkerNetwork = Marker + " network up"
	MarkerKS      = Marker + " kickstart fetched"
	MarkerPre     = Marker + " pre done"
	MarkerImage   = Marker + " image written"
	MarkerDone    = Marker + " done"
	MarkerError   = Marker + " error"
)

// Defaults of Options.
const (
	DefaultBusybox = "/bin/busybox"
	DefaultDisk    = "/dev/vda"
)

// DefaultModules drive QEMU's virtio NIC and disk; their dependencies are
// added by BuildInitramfs.
var DefaultModules = []string{"virtio_pci", "virtio_net", "virtio_blk"}

// modinfoTimeout bounds one modinfo call.
const modinfoTimeout = 10 * time.Second

//go:embed init.sh
var initScript string

//go:embed udhcpc.script
var udhcpcScript []byte

//go:embed curl.sh
var curlScript []byte

// Options configures BuildInitramfs.
type Options struct {
	// KernelDir holds "version" and "modules/<version>/" as
	// scripts/fetch-kernel.sh lays them out (RepoKernelDir). Required.
	KernelDir string
	// Busybox is a statically linked busybox (Debian busybox-static).
	Busybox string
	// Modules to load, dependencies resolved with modinfo.
	Modules []string
	// Disk the image is written to.
	Disk string
}

// RepoKernelDir is the repository's .data/kernel, where
// scripts/fetch-kernel.sh puts the Debian kernel.
func RepoKernelDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", ".data", "kernel")
}

// BuildInitramfs writes the installer's initramfs (a newc cpio archive,
// uncompressed) to outPath.
func BuildInitramfs(outPath string, opts Options) error {
	if opts.KernelDir == "" {
		return errors.New("build installer initramfs: no kernel directory")
	}
	if opts.Busybox == "" {
		opts.Busybox = DefaultBusybox
	}
	if opts.Disk == "" {
		opts.Disk = DefaultDisk
	}
	if len(opts.Modules) == 0 {
		opts.Modules = DefaultModules
	}
	if strings.ContainsAny(opts.Disk, " '\"$`\\\n") {
		return fmt.Errorf("build installer initramfs: disk %q", opts.Disk)
	}
	ver, err := os.ReadFile(filepath.Join(opts.KernelDir, "version"))
	if err != nil {
		return fmt.Errorf("build installer initramfs: kernel version (run scripts/fetch-kernel.sh): %w", err)
	}
	modDir := filepath.Join(opts.KernelDir, "modules", strings.TrimSpace(string(ver)))
	order, err := moduleLoadOrder(modDir, opts.Modules)
	if err != nil {
		return fmt.Errorf("build installer initramfs: %w", err)
	}
	busybox, err := os.ReadFile(opts.Busybox)
	if err != nil {
		return fmt.Errorf("build installer initramfs: read busybox (Debian busybox-static): %w", err)
	}

	var buf bytes.Buffer
	w := cpio.NewWriter(&buf)
	ar := archive{w: w}
	for _, d := range []string{"bin", "sbin", "usr", "usr/bin", "usr/sbin", "etc", "dev", "proc", "sys", "tmp", "run", "lib", "lib/modules", "var", "var/lib"} {
		ar.dir(d)
	}
	ar.file("bin/busybox", 0o755, busybox)
	ar.symlink("bin/sh", "busybox")
	init := strings.NewReplacer("@MARKER@", Marker, "@DISK@", opts.Disk).Replace(initScript)
	ar.file("init", 0o755, []byte(init))
	ar.file("etc/udhcpc.script", 0o755, udhcpcScript)
	ar.file("usr/bin/curl", 0o755, curlScript)
	names := make([]string, 0, len(order))
	for _, m := range order {
		ar.file("lib/modules/"+m.name+".ko", 0o644, m.data)
		names = append(names, m.name)
	}
	ar.file("lib/modules/load-order", 0o644, []byte(strings.Join(names, "\n")+"\n"))
	if ar.err != nil {
		return fmt.Errorf("build installer initramfs: %w", ar.err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("build installer initramfs: %w", err)
	}
	if err := os.WriteFile(outPath, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("build installer initramfs: %w", err)
	}
	return nil
}

type archive struct {
	w   *cpio.Writer
	err error
}

func (a *archive) add(h *cpio.Header, data []byte) {
	if a.err != nil {
		return
	}
	h.ModTime = time.Unix(0, 0) // the same inputs give the same archive
	if a.err = a.w.WriteHeader(h); a.err != nil {
		return
	}
	if len(data) > 0 {
		_, a.err = a.w.Write(data)
	}
}

func (a *archive) dir(name string) {
	a.add(&cpio.Header{Name: name, Mode: cpio.TypeDir | 0o755, Links: 2}, nil)
}

func (a *archive) file(name string, perm cpio.FileMode, data []byte) {
	a.add(&cpio.Header{Name: name, Mode: cpio.TypeReg | perm, Size: int64(len(data)), Links: 1}, data)
}

func (a *archive) symlink(name, target string) {
	a.add(&cpio.Header{Name: name, Mode: cpio.TypeSymlink | 0o777, Size: int64(len(target)), Links: 1}, []byte(target))
}

type module struct {
	name string
	data []byte
}

// moduleLoadOrder finds each module under modDir and the modules it
// depends on (modinfo -F depends), and returns them dependencies first.
// Built-in modules (modules.builtin) need no loading.
func moduleLoadOrder(modDir string, want []string) ([]module, error) {
	paths := map[string]string{}
	err := filepath.WalkDir(modDir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		base := d.Name()
		for _, ext := range []string{".ko", ".ko.zst", ".ko.xz"} {
			if name, ok := strings.CutSuffix(base, ext); ok {
				paths[strings.ReplaceAll(name, "-", "_")] = p
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list modules in %s: %w", modDir, err)
	}
	builtin := map[string]bool{}
	if b, err := os.ReadFile(filepath.Join(modDir, "modules.builtin")); err == nil {
		for _, l := range strings.Fields(string(b)) {
			builtin[strings.ReplaceAll(strings.TrimSuffix(filepath.Base(l), ".ko"), "-", "_")] = true
		}
	}
	var order []module
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(name string, chain []string) error
	visit = func(name string, chain []string) error {
		name = strings.ReplaceAll(name, "-", "_")
		switch {
		case state[name] == 2:
			return nil
		case state[name] == 1:
			return fmt.Errorf("module dependency cycle %v", append(chain, name))
		}
		p, ok := paths[name]
		if !ok {
			if builtin[name] {
				state[name] = 2
				return nil
			}
			return fmt.Errorf("module %s (needed by %v) is neither in %s nor built in", name, chain, modDir)
		}
		state[name] = 1
		deps, err := modinfoDepends(p)
		if err != nil {
			return err
		}
		for _, d := range deps {
			if err := visit(d, append(chain, name)); err != nil {
				return err
			}
		}
		data, err := readModule(p)
		if err != nil {
			return err
		}
		order = append(order, module{name: name, data: data})
		state[name] = 2
		return nil
	}
	sorted := append([]string(nil), want...)
	sort.Strings(sorted)
	for _, m := range sorted {
		if err := visit(m, nil); err != nil {
			return nil, err
		}
	}
	return order, nil
}

func modinfoDepends(path string) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), modinfoTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "modinfo", "-F", "depends", path).Output()
	if err != nil {
		return nil, fmt.Errorf("modinfo -F depends %s (Debian package kmod): %w", path, err)
	}
	var deps []string
	for _, d := range strings.Split(strings.TrimSpace(string(out)), ",") {
		if d = strings.TrimSpace(d); d != "" {
			deps = append(deps, d)
		}
	}
	return deps, nil
}

// readModule returns the module's ELF: busybox insmod loads uncompressed
// modules only.
func readModule(path string) ([]byte, error) {
	switch {
	case strings.HasSuffix(path, ".ko"):
		return os.ReadFile(path)
	case strings.HasSuffix(path, ".ko.zst"):
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		zr, err := zstd.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("decompress %s: %w", path, err)
		}
		defer zr.Close()
		b, err := io.ReadAll(zr)
		if err != nil {
			return nil, fmt.Errorf("decompress %s: %w", path, err)
		}
		return b, nil
	}
	return nil, fmt.Errorf("module %s: xz-compressed modules are not supported; unpack them with xz -d", path)
}
