package agent

import (
	"encoding/binary"
	"errors"
)

// The inventory's memory.physical_mb is the memory installed in the
// machine, as Ironic's agent reports it (from the DIMMs, not the kernel):
// Ironic turns it into the node's memory_mb. /proc/meminfo's MemTotal is
// smaller by what the firmware and the kernel reserve (a 512 MiB VM shows
// about 456 MiB), so the DIMMs are read from the SMBIOS table the kernel
// exposes at /sys/firmware/dmi/tables/DMI.

// SMBIOS structure types and Memory Device fields (DMTF DSP0134, 7.18).
const (
	smbiosTypeMemoryDevice = 17
	smbiosTypeEndOfTable   = 127
	// memDevSizeOffset is the Size WORD: bit 15 set means KiB units, else
	// MiB; 0 is an empty slot, 0xFFFF unknown, 0x7FFF "see Extended Size".
	memDevSizeOffset = 0x0C
	// memDevExtSizeOffset is the Extended Size DWORD (MiB, bits 0-30),
	// SMBIOS 2.7+, for modules of 32 GiB and more.
	memDevExtSizeOffset = 0x1C
)

var errNoMemoryDevices = errors.New("no SMBIOS memory devices with a known size")

// smbiosMemoryMB sums the sizes of the installed memory devices (type 17)
// of an SMBIOS structure table.
func smbiosMemoryMB(table []byte) (int64, error) {
	var kib int64
	found := false
	for off := 0; off+4 <= len(table); {
		typ, length := table[off], int(table[off+1])
		if length < 4 || off+length > len(table) {
			return 0, errors.New("truncated SMBIOS structure")
		}
		if typ == smbiosTypeEndOfTable {
			break
		}
		if typ == smbiosTypeMemoryDevice && length >= memDevSizeOffset+2 {
			s := table[off : off+length]
			switch size := binary.LittleEndian.Uint16(s[memDevSizeOffset:]); {
			case size == 0 || size == 0xFFFF:
				// An empty slot, or a module of unknown size.
			case size == 0x7FFF && length >= memDevExtSizeOffset+4:
				kib += int64(binary.LittleEndian.Uint32(s[memDevExtSizeOffset:])&0x7FFFFFFF) << 10
				found = true
			case size&0x8000 != 0:
				kib += int64(size & 0x7FFF)
				found = true
			default:
				kib += int64(size) << 10
				found = true
			}
		}
		// The formatted part is followed by its strings, ended by two NULs.
		next := off + length
		for next+1 < len(table) && (table[next] != 0 || table[next+1] != 0) {
			next++
		}
		off = next + 2
	}
	if !found {
		return 0, errNoMemoryDevices
	}
	return (kib + 1023) >> 10, nil
}
