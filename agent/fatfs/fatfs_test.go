package fatfs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// mkfs builds a FAT volume of the given kind with dosfstools and mtools
// (what tests/e2e builds its images with) and copies files into it, at
// offset 1 MiB of an image file as on a partitioned disk.
func mkfs(t *testing.T, fat, kib int, files map[string][]byte) (*os.File, int64) {
	t.Helper()
	for _, tool := range []string{"mkfs.vfat", "mcopy", "mmd"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("SKIPPING: %s missing (dosfstools, mtools)", tool)
		}
	}
	dir := t.TempDir()
	vol := filepath.Join(dir, "vol")
	run := func(argv ...string) {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), "MTOOLS_SKIP_CHECK=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", argv, err, out)
		}
	}
	run("mkfs.vfat", "-C", "-F", fmt.Sprint(fat), "-n", "ESP", vol, fmt.Sprint(kib))
	made := map[string]bool{}
	for name, data := range files {
		src := filepath.Join(dir, "src")
		if err := os.WriteFile(src, data, 0o644); err != nil {
			t.Fatal(err)
		}
		var dirs []string
		for d := filepath.Dir(name); d != "/"; d = filepath.Dir(d) {
			dirs = append([]string{d}, dirs...)
		}
		for _, d := range dirs {
			if !made[d] {
				run("mmd", "-i", vol, "::"+d)
				made[d] = true
			}
		}
		run("mcopy", "-i", vol, src, "::"+name)
	}
	b, err := os.ReadFile(vol)
	if err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, "disk")
	if err := os.WriteFile(img, append(make([]byte, 1<<20), b...), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, 1 << 20
}

func TestReadsLoadersFromFAT12FAT16AndFAT32(t *testing.T) {
	loader := bytes.Repeat([]byte("MZ loader "), 30000) // 300 kB: many clusters
	grub := []byte("grub second stage")
	for _, tc := range []struct {
		fat, kib int
	}{{12, 4096}, {16, 32768}, {32, 65536}} {
		t.Run(fmt.Sprintf("FAT%d", tc.fat), func(t *testing.T) {
			f, off := mkfs(t, tc.fat, tc.kib, map[string][]byte{
				"/EFI/BOOT/BOOTX64.EFI":            loader,
				"/EFI/BOOT/grubx64.efi":            grub,
				"/EFI/Microsoft/Boot/bootmgfw.efi": []byte("long directory name"),
			})
			v, err := Open(f, off)
			if err != nil {
				t.Fatal(err)
			}
			if v.Type() != fmt.Sprintf("FAT%d", tc.fat) {
				t.Errorf("type %s, want FAT%d", v.Type(), tc.fat)
			}
			for path, want := range map[string][]byte{
				`\EFI\BOOT\BOOTX64.EFI`:            loader,
				"/efi/boot/bootx64.efi":            loader,
				`\EFI\BOOT\grubx64.efi`:            grub,
				`\EFI\microsoft\Boot\BOOTMGFW.EFI`: []byte("long directory name"),
			} {
				got, err := v.ReadFile(path)
				if err != nil {
					t.Errorf("%s: %v", path, err)
				} else if !bytes.Equal(got, want) {
					t.Errorf("%s: %d bytes read, want %d bytes as written", path, len(got), len(want))
				}
			}
			if _, err := v.ReadFile(`\EFI\BOOT\shimx64.efi`); !errors.Is(err, ErrNotExist) {
				t.Errorf("missing file: %v, want ErrNotExist", err)
			}
			if _, err := v.ReadFile(`\EFI\BOOT`); err == nil {
				t.Errorf("a directory read as a file")
			}
		})
	}
}

func TestNotAFATVolume(t *testing.T) {
	if _, err := Open(bytes.NewReader(make([]byte, 4096)), 0); err == nil {
		t.Fatal("zeros opened as a FAT volume")
	}
}
