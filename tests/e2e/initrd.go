package e2e

import (
	"bytes"
	"debug/elf"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/klauspost/compress/gzip"
)

// initrdModules are the modules the test image's init loads to read a
// config drive on a virtio disk or a SCSI one (a vbmc RAID volume); their
// dependencies are added from the modules' own .modinfo.
var initrdModules = []string{"virtio_pci", "virtio_blk", "virtio_scsi", "sd_mod", "isofs"}

// moduleSet resolves names to .ko files of the kernel's module tree and
// orders them so that each module comes after its dependencies.
type moduleSet struct {
	paths map[string]string // module name (underscores) -> path
	order []string
	seen  map[string]bool
}

func modName(s string) string { return strings.ReplaceAll(s, "-", "_") }

func newModuleSet(modulesDir string) (*moduleSet, error) {
	ms := &moduleSet{paths: map[string]string{}, seen: map[string]bool{}}
	err := filepath.WalkDir(modulesDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".ko") {
			ms.paths[modName(strings.TrimSuffix(d.Name(), ".ko"))] = p
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list kernel modules in %s: %w", modulesDir, err)
	}
	if len(ms.paths) == 0 {
		return nil, fmt.Errorf("no uncompressed .ko modules in %s", modulesDir)
	}
	return ms, nil
}

// add appends name after its dependencies (depth first).
func (ms *moduleSet) add(name string) error {
	name = modName(name)
	if ms.seen[name] {
		return nil
	}
	ms.seen[name] = true
	p, ok := ms.paths[name]
	if !ok {
		return fmt.Errorf("kernel module %s not found (is it built in? then drop it from the list)", name)
	}
	deps, err := moduleDepends(p)
	if err != nil {
		return err
	}
	for _, d := range deps {
		if err := ms.add(d); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	ms.order = append(ms.order, name)
	return nil
}

// moduleDepends reads the depends= entry of a module's .modinfo section,
// what `modinfo -F depends` prints: the kernel package has no modules.dep.
func moduleDepends(path string) ([]string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open kernel module %s: %w", path, err)
	}
	defer f.Close()
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, fmt.Errorf("kernel module %s has no .modinfo", path)
	}
	data, err := sec.Data()
	if err != nil {
		return nil, fmt.Errorf("read .modinfo of %s: %w", path, err)
	}
	for _, kv := range bytes.Split(data, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("depends=")); ok {
			if len(v) == 0 {
				return nil, nil
			}
			return strings.Split(string(v), ","), nil
		}
	}
	return nil, nil
}

// newcEntry is one member of a newc (SVR4, no CRC) cpio archive, the
// format the kernel unpacks as initramfs.
type newcEntry struct {
	name         string
	mode         uint32 // type and permission bits, as in stat(2)
	rdevMajor    uint32
	rdevMinor    uint32
	data         []byte
	symlinkValue string
}

const (
	modeDir     = 0o040000
	modeReg     = 0o100000
	modeChar    = 0o020000
	modeSymlink = 0o120000
)

// writeNewc writes entries as a newc archive with its trailer. Written by
// hand because the kernel needs a /dev/console device node before anything
// mounts devtmpfs, and cpio libraries do not all set device numbers.
func writeNewc(entries []newcEntry) []byte {
	var b bytes.Buffer
	pad := func() {
		for b.Len()%4 != 0 {
			b.WriteByte(0)
		}
	}
	write := func(ino int, e newcEntry) {
		data := e.data
		if e.mode&0o170000 == modeSymlink {
			data = []byte(e.symlinkValue)
		}
		nlink := 1
		if e.mode&0o170000 == modeDir {
			nlink = 2
		}
		fmt.Fprintf(&b, "070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x",
			ino, e.mode, 0, 0, nlink, 0, len(data), 0, 0, e.rdevMajor, e.rdevMinor, len(e.name)+1, 0)
		b.WriteString(e.name)
		b.WriteByte(0)
		pad()
		b.Write(data)
		pad()
	}
	for i, e := range entries {
		write(i+1, e)
	}
	write(0, newcEntry{name: "TRAILER!!!"})
	return b.Bytes()
}

// buildInitrd returns the gzipped initramfs of the test image: busybox as
// every tool, the modules in load order (listed in /lib/modules/order), a
// /dev/console node and /init.
func buildInitrd(busybox, modulesDir, initScript string) ([]byte, error) {
	bb, err := os.ReadFile(busybox)
	if err != nil {
		return nil, fmt.Errorf("read busybox: %w", err)
	}
	ms, err := newModuleSet(modulesDir)
	if err != nil {
		return nil, err
	}
	for _, m := range initrdModules {
		if err := ms.add(m); err != nil {
			return nil, fmt.Errorf("resolve initrd modules: %w", err)
		}
	}
	entries := []newcEntry{
		{name: "bin", mode: modeDir | 0o755},
		{name: "dev", mode: modeDir | 0o755},
		{name: "dev/console", mode: modeChar | 0o600, rdevMajor: 5, rdevMinor: 1},
		{name: "lib", mode: modeDir | 0o755},
		{name: "lib/modules", mode: modeDir | 0o755},
		{name: "mnt", mode: modeDir | 0o755},
		{name: "proc", mode: modeDir | 0o755},
		{name: "sys", mode: modeDir | 0o755},
		{name: "bin/busybox", mode: modeReg | 0o755, data: bb},
		{name: "bin/sh", mode: modeSymlink | 0o777, symlinkValue: "busybox"},
		{name: "init", mode: modeReg | 0o755, data: []byte(initScript)},
		{name: "lib/modules/order", mode: modeReg | 0o644, data: []byte(strings.Join(ms.order, "\n") + "\n")},
	}
	for _, m := range ms.order {
		data, err := os.ReadFile(ms.paths[m])
		if err != nil {
			return nil, fmt.Errorf("read kernel module %s: %w", m, err)
		}
		entries = append(entries, newcEntry{name: "lib/modules/" + m + ".ko", mode: modeReg | 0o644, data: data})
	}
	var out bytes.Buffer
	zw, err := gzip.NewWriterLevel(&out, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(writeNewc(entries)); err != nil {
		return nil, fmt.Errorf("compress initrd: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("compress initrd: %w", err)
	}
	return out.Bytes(), nil
}
