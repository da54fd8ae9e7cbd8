package agent

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// smbiosStruct is one SMBIOS structure: header, formatted part of length
// bytes with the given little-endian fields set, then its strings.
func smbiosStruct(typ byte, length int, words map[int]uint16, dwords map[int]uint32, strs ...string) []byte {
	b := make([]byte, length)
	b[0], b[1] = typ, byte(length)
	for off, v := range words {
		binary.LittleEndian.PutUint16(b[off:], v)
	}
	for off, v := range dwords {
		binary.LittleEndian.PutUint32(b[off:], v)
	}
	if len(strs) == 0 {
		return append(b, 0, 0)
	}
	for _, s := range strs {
		b = append(append(b, s...), 0)
	}
	return append(b, 0)
}

func memDevice(size uint16, ext uint32) []byte {
	return smbiosStruct(smbiosTypeMemoryDevice, 0x28, map[int]uint16{memDevSizeOffset: size},
		map[int]uint32{memDevExtSizeOffset: ext}, "DIMM 0", "QEMU")
}

func TestSMBIOSMemoryMB(t *testing.T) {
	bios := smbiosStruct(0, 0x18, nil, nil, "SeaBIOS", "1.16")
	end := smbiosStruct(smbiosTypeEndOfTable, 4, nil, nil)
	cat := func(parts ...[]byte) []byte {
		var out []byte
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	cases := []struct {
		name    string
		table   []byte
		want    int64
		wantErr bool
	}{
		{"one 512 MiB module (a QEMU VM)", cat(bios, memDevice(512, 0), end), 512, false},
		{"two modules and an empty slot", cat(bios, memDevice(16384, 0), memDevice(0, 0), memDevice(16384, 0), end), 32768, false},
		{"extended size", cat(memDevice(0x7FFF, 65536), memDevice(0x7FFF, 65536), end), 131072, false},
		{"KiB granularity", cat(memDevice(0x8000|0x4000, 0), memDevice(0x8000|0x4000, 0), end), 32, false},
		{"unknown sizes only", cat(bios, memDevice(0xFFFF, 0), end), 0, true},
		{"no memory devices", cat(bios, end), 0, true},
		{"structures after the end are not read", cat(memDevice(1024, 0), end, memDevice(1024, 0)), 1024, false},
		{"a type 17 without strings", cat(smbiosStruct(smbiosTypeMemoryDevice, 0x15, map[int]uint16{memDevSizeOffset: 2048}, nil), end), 2048, false},
		{"truncated structure", cat(memDevice(512, 0))[:10], 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := smbiosMemoryMB(tc.table)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("smbiosMemoryMB = %d, %v; want %d, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// TestInventoryPhysicalMemoryFromSMBIOS: physical_mb is the installed
// memory when the firmware lists its modules, MemTotal rounded up when not.
func TestInventoryPhysicalMemoryFromSMBIOS(t *testing.T) {
	proc := t.TempDir()
	if err := os.WriteFile(filepath.Join(proc, "meminfo"), []byte("MemTotal:         466132 kB\nMemFree:          400000 kB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		table []byte
		want  int64
	}{
		{"SMBIOS table", append(memDevice(512, 0), smbiosStruct(smbiosTypeEndOfTable, 4, nil, nil)...), 512},
		{"no SMBIOS table", nil, 456},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sys := t.TempDir()
			if err := os.MkdirAll(filepath.Join(sys, "block"), 0o755); err != nil {
				t.Fatal(err)
			}
			if tc.table != nil {
				dir := filepath.Join(sys, "firmware", "dmi", "tables")
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "DMI"), tc.table, 0o444); err != nil {
					t.Fatal(err)
				}
			}
			hw := &LinuxHardware{SysRoot: sys, ProcRoot: proc, DevRoot: t.TempDir()}
			inv, err := hw.Inventory(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if inv.Memory.PhysicalMB != tc.want || inv.Memory.Total != 466132*1024 {
				t.Fatalf("memory %+v, want physical_mb %d and total %d", inv.Memory, tc.want, 466132*1024)
			}
		})
	}
}
