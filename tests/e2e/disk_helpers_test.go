package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"testing"
)

// Reading a VM's disk file after a scenario: what the agent wrote or erased.

// hasPartitionTable reads the disk file: an MBR ends its first sector with
// 55 AA, a GPT header starts LBA 1 with "EFI PART".
func hasPartitionTable(t *testing.T, disk string) bool {
	t.Helper()
	f, err := os.Open(disk)
	if err != nil {
		t.Fatalf("open disk %s: %v", disk, err)
	}
	defer f.Close()
	b := make([]byte, 1024)
	if _, err := f.ReadAt(b, 0); err != nil {
		t.Fatalf("read disk %s: %v", disk, err)
	}
	mbr := b[510] == 0x55 && b[511] == 0xaa
	gpt := bytes.Equal(b[512:520], []byte("EFI PART"))
	t.Logf("disk %s: MBR signature %v, GPT header %v", disk, mbr, gpt)
	return mbr || gpt
}

// seekData and seekHole are lseek(2)'s SEEK_DATA and SEEK_HOLE.
const (
	seekData = 3
	seekHole = 4
)

// firstNonZero returns the offset of the first non-zero byte of the
// disk file, or -1 when it holds only zeros. It reads only the file's data
// extents (SEEK_DATA), so a sparse multi-GiB disk is checked in moments.
func firstNonZero(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	buf := make([]byte, 1<<20)
	var off int64
	for off < st.Size() {
		data, err := syscall.Seek(int(f.Fd()), off, seekData)
		if errors.Is(err, syscall.ENXIO) {
			return -1, nil // no data after off: a hole to the end
		}
		if err != nil {
			return 0, fmt.Errorf("seek data in %s: %w", path, err)
		}
		hole, err := syscall.Seek(int(f.Fd()), data, seekHole)
		if err != nil {
			return 0, fmt.Errorf("seek hole in %s: %w", path, err)
		}
		for pos := data; pos < hole; {
			n, err := f.ReadAt(buf[:min(int64(len(buf)), hole-pos)], pos)
			if len(bytes.Trim(buf[:n], "\x00")) > 0 {
				for j, b := range buf[:n] {
					if b != 0 {
						return pos + int64(j), nil
					}
				}
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return 0, fmt.Errorf("read %s: %w", path, err)
			}
			if n == 0 {
				break
			}
			pos += int64(n)
		}
		off = hole
	}
	return -1, nil
}
