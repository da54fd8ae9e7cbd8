// Package fatfs reads files from a FAT12, FAT16 or FAT32 volume (an EFI
// system partition), read-only, as Microsoft's FAT specification ("FAT:
// General Overview of On-Disk Format") lays them out: the BPB, the file
// allocation table, directory entries with long names. The agent reads the
// instance's boot loader through it without mounting anything (an ESP of a
// whole-disk image is often FAT16, which go-diskfs does not read).
package fatfs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf16"
)

// MaxFileSize bounds what ReadFile loads: a boot loader is a few MiB.
const MaxFileSize = 256 << 20

// ErrNotExist: no such file or directory on the volume.
var ErrNotExist = errors.New("no such file on the FAT volume")

// Volume is an open FAT volume.
type Volume struct {
	r           io.ReaderAt
	off         int64 // the volume's first byte in r
	bps         int64 // bytes per sector
	clusterSize int64
	fatOff      int64 // the first FAT
	rootOff     int64 // FAT12/16: the fixed root directory
	rootSize    int64
	rootCluster uint32 // FAT32
	dataOff     int64  // cluster 2
	clusters    uint32
	bits        int // 12, 16 or 32
}

// Open reads the boot sector of the volume that starts at offset off of r.
func Open(r io.ReaderAt, off int64) (*Volume, error) {
	bs := make([]byte, 512)
	if _, err := r.ReadAt(bs, off); err != nil {
		return nil, fmt.Errorf("read the FAT boot sector: %w", err)
	}
	le16 := func(o int) int64 { return int64(binary.LittleEndian.Uint16(bs[o:])) }
	le32 := func(o int) int64 { return int64(binary.LittleEndian.Uint32(bs[o:])) }
	v := &Volume{r: r, off: off, bps: le16(11)}
	spc, reserved, nfats, rootEntries := int64(bs[13]), le16(14), int64(bs[16]), le16(17)
	fatSize, total := le16(22), le16(19)
	if fatSize == 0 {
		fatSize = le32(36)
	}
	if total == 0 {
		total = le32(32)
	}
	if bs[510] != 0x55 || bs[511] != 0xaa || v.bps < 512 || v.bps > 4096 || v.bps&(v.bps-1) != 0 ||
		spc == 0 || spc&(spc-1) != 0 || nfats == 0 || fatSize == 0 || reserved == 0 {
		return nil, errors.New("not a FAT volume (no valid BPB)")
	}
	v.clusterSize = spc * v.bps
	v.fatOff = off + reserved*v.bps
	rootSectors := (rootEntries*32 + v.bps - 1) / v.bps
	v.rootOff = v.fatOff + nfats*fatSize*v.bps
	v.rootSize = rootSectors * v.bps
	v.dataOff = v.rootOff + v.rootSize
	data := total - (reserved + nfats*fatSize + rootSectors)
	if data <= 0 {
		return nil, errors.New("not a FAT volume (no data region)")
	}
	v.clusters = uint32(data / spc)
	switch {
	case v.clusters < 4085:
		v.bits = 12
	case v.clusters < 65525:
		v.bits = 16
	default:
		v.bits = 32
		v.rootCluster = uint32(le32(44))
	}
	return v, nil
}

// Type is "FAT12", "FAT16" or "FAT32".
func (v *Volume) Type() string { return fmt.Sprintf("FAT%d", v.bits) }

// next is the FAT entry of cluster n; ok is false at the chain's end or
// on a free, bad or out-of-range entry.
func (v *Volume) next(n uint32) (uint32, bool, error) {
	var b [4]byte
	var e uint32
	switch v.bits {
	case 12:
		if _, err := v.r.ReadAt(b[:2], v.fatOff+int64(n+n/2)); err != nil {
			return 0, false, err
		}
		e = uint32(binary.LittleEndian.Uint16(b[:]))
		if n&1 == 1 {
			e >>= 4
		}
		e &= 0xfff
		if e >= 0xff7 {
			return 0, false, nil
		}
	case 16:
		if _, err := v.r.ReadAt(b[:2], v.fatOff+int64(n)*2); err != nil {
			return 0, false, err
		}
		e = uint32(binary.LittleEndian.Uint16(b[:]))
		if e >= 0xfff7 {
			return 0, false, nil
		}
	default:
		if _, err := v.r.ReadAt(b[:], v.fatOff+int64(n)*4); err != nil {
			return 0, false, err
		}
		e = binary.LittleEndian.Uint32(b[:]) & 0x0fffffff
		if e >= 0x0ffffff7 {
			return 0, false, nil
		}
	}
	if e < 2 || e >= v.clusters+2 {
		return 0, false, nil
	}
	return e, true, nil
}

// chain reads up to limit bytes of the cluster chain that starts at first.
func (v *Volume) chain(first uint32, limit int64) ([]byte, error) {
	var out []byte
	seen := map[uint32]bool{}
	for c, ok := first, first >= 2 && first < v.clusters+2; ok && int64(len(out)) < limit; {
		if seen[c] {
			return nil, errors.New("FAT cluster chain loops")
		}
		seen[c] = true
		buf := make([]byte, v.clusterSize)
		if _, err := v.r.ReadAt(buf, v.dataOff+int64(c-2)*v.clusterSize); err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("read cluster %d: %w", c, err)
		}
		out = append(out, buf...)
		var err error
		if c, ok, err = v.next(c); err != nil {
			return nil, fmt.Errorf("read the FAT: %w", err)
		}
	}
	if int64(len(out)) > limit {
		out = out[:limit]
	}
	return out, nil
}

type entry struct {
	name    string // the long name if there is one, else the 8.3 name
	short   string
	dir     bool
	cluster uint32
	size    int64
}

func (v *Volume) rootEntries() ([]byte, error) {
	if v.bits == 32 {
		return v.chain(v.rootCluster, MaxFileSize)
	}
	b := make([]byte, v.rootSize)
	if _, err := v.r.ReadAt(b, v.rootOff); err != nil {
		return nil, fmt.Errorf("read the root directory: %w", err)
	}
	return b, nil
}

func parseDir(b []byte) []entry {
	var out []entry
	var lfn []uint16
	for i := 0; i+32 <= len(b); i += 32 {
		e := b[i : i+32]
		switch {
		case e[0] == 0:
			return out
		case e[0] == 0xe5:
			lfn = nil
			continue
		case e[11]&0x3f == 0x0f: // a long-name entry, stored last part first
			var part []uint16
			for _, o := range []int{1, 3, 5, 7, 9, 14, 16, 18, 20, 22, 24, 28, 30} {
				part = append(part, binary.LittleEndian.Uint16(e[o:]))
			}
			if e[0]&0x40 != 0 {
				lfn = nil
			}
			lfn = append(part, lfn...)
			continue
		case e[11]&0x08 != 0: // volume label
			lfn = nil
			continue
		}
		base := strings.TrimRight(string(e[0:8]), " ")
		if e[0] == 0x05 {
			base = "\xe5" + base[1:]
		}
		short := base
		if ext := strings.TrimRight(string(e[8:11]), " "); ext != "" {
			short += "." + ext
		}
		name := short
		if len(lfn) > 0 {
			n := len(lfn)
			for j, c := range lfn {
				if c == 0 || c == 0xffff {
					n = j
					break
				}
			}
			name = string(utf16.Decode(lfn[:n]))
		}
		lfn = nil
		out = append(out, entry{
			name: name, short: short, dir: e[11]&0x10 != 0,
			cluster: uint32(binary.LittleEndian.Uint16(e[20:]))<<16 | uint32(binary.LittleEndian.Uint16(e[26:])),
			size:    int64(binary.LittleEndian.Uint32(e[28:])),
		})
	}
	return out
}

// ReadFile returns the file at path (slashes or backslashes, matched
// without regard to case, as UEFI's FAT driver does).
func (v *Volume) ReadFile(path string) ([]byte, error) {
	parts := strings.FieldsFunc(path, func(r rune) bool { return r == '/' || r == '\\' })
	if len(parts) == 0 {
		return nil, fmt.Errorf("%s: is the root directory", path)
	}
	dir, err := v.rootEntries()
	if err != nil {
		return nil, err
	}
	for i, p := range parts {
		var found *entry
		for _, e := range parseDir(dir) {
			if strings.EqualFold(e.name, p) || strings.EqualFold(e.short, p) {
				found = &e
				break
			}
		}
		if found == nil {
			return nil, fmt.Errorf("%s: %w", path, ErrNotExist)
		}
		last := i == len(parts)-1
		switch {
		case last && found.dir:
			return nil, fmt.Errorf("%s: is a directory", path)
		case last:
			if found.size > MaxFileSize {
				return nil, fmt.Errorf("%s: %d bytes, more than a boot loader", path, found.size)
			}
			b, err := v.chain(found.cluster, found.size)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			if int64(len(b)) < found.size {
				return nil, fmt.Errorf("%s: its cluster chain ends before its %d bytes", path, found.size)
			}
			return b, nil
		case !found.dir:
			return nil, fmt.Errorf("%s: %s is not a directory", path, p)
		}
		if dir, err = v.chain(found.cluster, MaxFileSize); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	return nil, fmt.Errorf("%s: %w", path, ErrNotExist)
}
