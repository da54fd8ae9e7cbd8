package ramdisk

import (
	"debug/elf"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// DefaultMdadm is Debian's mdadm (package mdadm), which the agent's
// software RAID steps run (agent/raid.go); the ramdisk carries it at the
// same path, with the shared libraries it loads.
const DefaultMdadm = "/sbin/mdadm"

// MDModules are the md driver and its RAID personalities, loaded at boot
// (agent/boot) for the software RAID steps.
var MDModules = []string{"md_mod", "raid0", "raid1", "raid10", "raid456"}

// libDirs are where the dynamic loader looks without an ld.so.cache, and
// where the ramdisk puts a carried binary's libraries.
var libDirs = []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"}

// dynamicBinary is an ELF binary with its interpreter and the shared
// libraries it needs (DT_NEEDED, transitively), as ramdisk paths →
// contents: Debian's binaries are not static, and the ramdisk has no libc
// besides what is carried this way.
func dynamicBinary(bin string) (map[string][]byte, error) {
	out := map[string][]byte{}
	var add func(file, at string) error
	add = func(file, at string) error {
		at = strings.TrimPrefix(at, "/")
		if _, done := out[at]; done {
			return nil
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		out[at] = b
		f, err := elf.Open(file)
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		defer f.Close()
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				buf := make([]byte, p.Filesz)
				if _, err := p.ReadAt(buf, 0); err != nil {
					return fmt.Errorf("%s: interpreter: %w", file, err)
				}
				interp := strings.TrimRight(string(buf), "\x00")
				if err := add(interp, interp); err != nil {
					return err
				}
			}
		}
		libs, err := f.ImportedLibraries()
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		for _, lib := range libs {
			var found bool
			for _, d := range libDirs {
				p := filepath.Join(d, lib)
				if _, err := os.Stat(p); err == nil {
					if err := add(p, path.Join("lib/x86_64-linux-gnu", lib)); err != nil {
						return err
					}
					found = true
					break
				}
			}
			if !found {
				return fmt.Errorf("%s needs %s, not found in %s", file, lib, strings.Join(libDirs, " "))
			}
		}
		return nil
	}
	if err := add(bin, bin); err != nil {
		return nil, err
	}
	return out, nil
}
