package fatfs

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// FuzzReadFile: any bytes (the ESP of an image a user supplied) open and
// read without a panic, and a file read back is never longer than
// MaxFileSize. Seeded with a small FAT12 volume made by dosfstools.
func FuzzReadFile(f *testing.F) {
	f.Add(make([]byte, 4096))
	if seed := fuzzSeedVolume(f); seed != nil {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := Open(bytes.NewReader(b), 0)
		if err != nil {
			return
		}
		for _, p := range []string{`\EFI\BOOT\BOOTX64.EFI`, "/efi/boot/grubx64.efi", `\EFI`} {
			if got, err := v.ReadFile(p); err == nil && int64(len(got)) > MaxFileSize {
				t.Fatalf("%s: %d bytes, over MaxFileSize", p, len(got))
			}
		}
	})
}

// fuzzSeedVolume is a 128 KiB FAT12 volume holding \EFI\BOOT\BOOTX64.EFI
// and grubx64.efi, or nil when dosfstools or mtools are missing.
func fuzzSeedVolume(f *testing.F) []byte {
	vol := filepath.Join(f.TempDir(), "vol")
	for _, argv := range [][]string{
		{"mkfs.vfat", "-C", "-F", "12", vol, "128"},
		{"mmd", "-i", vol, "::/EFI", "::/EFI/BOOT"},
		{"sh", "-c", "printf 'MZ loader' | mcopy -i " + vol + " - ::/EFI/BOOT/BOOTX64.EFI"},
		{"sh", "-c", "printf 'grub' | mcopy -i " + vol + " - ::/EFI/BOOT/grubx64.efi"},
	} {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), "MTOOLS_SKIP_CHECK=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			f.Logf("no seed volume: %v: %v: %s", argv, err, out)
			return nil
		}
	}
	b, err := os.ReadFile(vol)
	if err != nil {
		return nil
	}
	return b
}
