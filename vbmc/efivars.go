package vbmc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"unicode/utf16"
)

// A Redfish BMC boots a UEFI machine from a URL (BootSourceOverrideTarget
// UefiHttp with Boot.HttpBootUri) by giving its firmware a one-time boot
// option for that URI, as a real BMC does through the firmware's
// settings. vbmc writes that option into the VM's variable store before
// QEMU starts: a load option Boot0100 whose file path is a short-form URI
// device path (UEFI specification §10.3.5.23), and BootNext = 0x0100.
// OVMF's boot manager (edk2 MdeModulePkg, BmBoot.c, BmExpandUriDevicePath)
// hands a short-form URI to the network's LoadFile (HttpBootDxe), which
// gets an address by DHCP and fetches the URI itself, booting an EFI
// application or an ISO (as a RAM disk) from it. BootNext is deleted by
// the firmware when it is used, so the option boots once.
//
// The store is OVMF's: a firmware volume whose header is followed by a
// variable store (edk2 MdeModulePkg/Include/Guid/VariableFormat.h) in the
// authenticated or the plain format. Variables are appended in its free
// space; an earlier Boot0100 or BootNext is marked deleted first, as the
// variable driver itself updates a variable.

// httpBootOption is the load option vbmc writes (Boot0100).
const httpBootOption = 0x0100

var (
	// efiGlobalVariable is EFI_GLOBAL_VARIABLE's GUID, the vendor of
	// Boot#### and BootNext, in its on-disk (mixed-endian) form.
	efiGlobalVariable = guidBytes(0x8BE4DF61, 0x93CA, 0x11D2, [8]byte{0xAA, 0x0D, 0x00, 0xE0, 0x98, 0x03, 0x2B, 0x8C})
	// The two variable store formats: gEfiAuthenticatedVariableGuid and
	// gEfiVariableGuid.
	authenticatedStore = guidBytes(0xAAF32C78, 0x947B, 0x439A, [8]byte{0xA1, 0x80, 0x2E, 0x14, 0x4E, 0xC3, 0x77, 0x92})
	plainStore         = guidBytes(0xDDCF3616, 0x3275, 0x4164, [8]byte{0x98, 0xB6, 0xFE, 0x85, 0x70, 0x7F, 0xFE, 0x7D})
)

func guidBytes(a uint32, b, c uint16, d [8]byte) []byte {
	g := make([]byte, 16)
	binary.LittleEndian.PutUint32(g, a)
	binary.LittleEndian.PutUint16(g[4:], b)
	binary.LittleEndian.PutUint16(g[6:], c)
	copy(g[8:], d[:])
	return g
}

const (
	varStartID = 0x55AA
	// Variable states (VariableFormat.h): a header's state bits are
	// cleared as it goes from written to valid to deleted.
	varAdded   = 0x3F
	varDeleted = 0xFD
	// EFI_VARIABLE_NON_VOLATILE | BOOTSERVICE_ACCESS | RUNTIME_ACCESS.
	varAttrNVBSRT = 0x7
	// fvHeaderLengthAt is EFI_FIRMWARE_VOLUME_HEADER.HeaderLength.
	fvHeaderLengthAt = 48
	// storeHeaderSize: Signature GUID, Size, Format, State, two reserved.
	storeHeaderSize = 28
	storeFormatted  = 0x5A
	storeHealthy    = 0xFE
)

// variableStore is the variable store of an OVMF variable file.
type variableStore struct {
	data          []byte
	start, end    int // the variables' region
	headerSize    int // 60 authenticated, 32 plain
	nameSizeAt    int // NameSize's offset in a header
	vendorGUIDAt  int
	authenticated bool
}

func parseVariableStore(data []byte) (*variableStore, error) {
	if len(data) < fvHeaderLengthAt+2 || string(data[40:44]) != "_FVH" {
		return nil, errors.New("not a firmware volume (no _FVH signature)")
	}
	off := int(binary.LittleEndian.Uint16(data[fvHeaderLengthAt:]))
	if off+storeHeaderSize > len(data) {
		return nil, errors.New("truncated variable store header")
	}
	s := &variableStore{data: data}
	switch sig := data[off : off+16]; {
	case bytes.Equal(sig, authenticatedStore):
		// StartId, State, Reserved, Attributes, MonotonicCount, TimeStamp,
		// PubKeyIndex, NameSize, DataSize, VendorGuid.
		s.authenticated, s.headerSize, s.nameSizeAt, s.vendorGUIDAt = true, 60, 36, 44
	case bytes.Equal(sig, plainStore):
		// StartId, State, Reserved, Attributes, NameSize, DataSize, VendorGuid.
		s.headerSize, s.nameSizeAt, s.vendorGUIDAt = 32, 8, 16
	default:
		return nil, errors.New("unknown variable store signature")
	}
	size := int(binary.LittleEndian.Uint32(data[off+16:]))
	if data[off+20] != storeFormatted || data[off+21] != storeHealthy {
		return nil, fmt.Errorf("variable store not formatted and healthy (format %#x, state %#x)", data[off+20], data[off+21])
	}
	if off+size > len(data) || size < storeHeaderSize {
		return nil, fmt.Errorf("variable store size %d beyond the file's %d bytes", size, len(data))
	}
	s.start, s.end = off+storeHeaderSize, off+size
	return s, nil
}

// variable is one header in the store: where it starts and what it names.
type variable struct {
	at, next int
	state    byte
	name     string
	vendor   []byte
	data     []byte
}

// variables walks the store's headers up to its free space.
func (s *variableStore) variables() ([]variable, int, error) {
	var vs []variable
	off := align4(s.start)
	for off+s.headerSize <= s.end && binary.LittleEndian.Uint16(s.data[off:]) == varStartID {
		nameSize := int(binary.LittleEndian.Uint32(s.data[off+s.nameSizeAt:]))
		dataSize := int(binary.LittleEndian.Uint32(s.data[off+s.nameSizeAt+4:]))
		body := off + s.headerSize
		if nameSize < 0 || dataSize < 0 || body+nameSize+dataSize > s.end {
			return nil, 0, fmt.Errorf("variable at %#x runs past the store", off)
		}
		v := variable{at: off, state: s.data[off+2], vendor: s.data[off+s.vendorGUIDAt : off+s.vendorGUIDAt+16],
			name: ucs2String(s.data[body : body+nameSize]), data: s.data[body+nameSize : body+nameSize+dataSize]}
		v.next = align4(body + nameSize + dataSize)
		vs = append(vs, v)
		off = v.next
	}
	return vs, off, nil
}

// set writes name (of EFI_GLOBAL_VARIABLE) with data: the valid copy, if
// any, is marked deleted and the new one appended in the free space.
func (s *variableStore) set(name string, data []byte) error {
	vs, free, err := s.variables()
	if err != nil {
		return err
	}
	h := s.header(name, data)
	if free+len(h) > s.end {
		return fmt.Errorf("no room for %s in the variable store (%d bytes free)", name, s.end-free)
	}
	for _, v := range vs {
		if v.state == varAdded && v.name == name && bytes.Equal(v.vendor, efiGlobalVariable) {
			s.data[v.at+2] &= varDeleted
		}
	}
	copy(s.data[free:], h)
	return nil
}

// header is a variable's header, name and data, padded to 4 bytes.
func (s *variableStore) header(name string, data []byte) []byte {
	n := ucs2(name)
	h := make([]byte, s.headerSize)
	binary.LittleEndian.PutUint16(h, varStartID)
	h[2] = varAdded
	binary.LittleEndian.PutUint32(h[4:], varAttrNVBSRT)
	// Authenticated: MonotonicCount, TimeStamp and PubKeyIndex stay 0, as
	// for any variable not written with time-based authentication.
	binary.LittleEndian.PutUint32(h[s.nameSizeAt:], uint32(len(n)))
	binary.LittleEndian.PutUint32(h[s.nameSizeAt+4:], uint32(len(data)))
	copy(h[s.vendorGUIDAt:], efiGlobalVariable)
	h = append(append(h, n...), data...)
	for len(h)%4 != 0 {
		h = append(h, 0xFF)
	}
	return h
}

// get is the valid value of an EFI_GLOBAL_VARIABLE (ok false if none).
func (s *variableStore) get(name string) ([]byte, bool, error) {
	vs, _, err := s.variables()
	if err != nil {
		return nil, false, err
	}
	for _, v := range vs {
		if v.state == varAdded && v.name == name && bytes.Equal(v.vendor, efiGlobalVariable) {
			return v.data, true, nil
		}
	}
	return nil, false, nil
}

// uriLoadOption is an EFI_LOAD_OPTION (UEFI §3.1.3), active, described as
// desc, whose file path is the short-form URI device path of uri.
func uriLoadOption(desc, uri string) []byte {
	var dp bytes.Buffer
	// Messaging (3), URI (24), length.
	dp.Write([]byte{0x03, 0x18})
	_ = binary.Write(&dp, binary.LittleEndian, uint16(4+len(uri)))
	dp.WriteString(uri)
	dp.Write([]byte{0x7F, 0xFF, 0x04, 0x00}) // end of the entire path
	var lo bytes.Buffer
	_ = binary.Write(&lo, binary.LittleEndian, uint32(1)) // LOAD_OPTION_ACTIVE
	_ = binary.Write(&lo, binary.LittleEndian, uint16(dp.Len()))
	lo.Write(ucs2(desc))
	lo.Write(dp.Bytes())
	return lo.Bytes()
}

// setHTTPBootNext gives the firmware whose variable file is path a
// one-time boot from uri: Boot0100 and BootNext.
func setHTTPBootNext(path, uri string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s, err := parseVariableStore(data)
	if err != nil {
		return fmt.Errorf("variable store %s: %w", path, err)
	}
	next := make([]byte, 2)
	binary.LittleEndian.PutUint16(next, httpBootOption)
	if err := s.set(fmt.Sprintf("Boot%04X", httpBootOption), uriLoadOption("UEFI HTTP boot from the BMC", uri)); err != nil {
		return fmt.Errorf("variable store %s: %w", path, err)
	}
	if err := s.set("BootNext", next); err != nil {
		return fmt.Errorf("variable store %s: %w", path, err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, s.data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func align4(n int) int { return (n + 3) &^ 3 }

func ucs2(s string) []byte {
	u := utf16.Encode([]rune(s))
	b := make([]byte, 2*len(u)+2)
	for i, r := range u {
		binary.LittleEndian.PutUint16(b[2*i:], r)
	}
	return b
}

func ucs2String(b []byte) string {
	u := make([]uint16, 0, len(b)/2)
	for i := 0; i+1 < len(b); i += 2 {
		r := binary.LittleEndian.Uint16(b[i:])
		if r == 0 {
			break
		}
		u = append(u, r)
	}
	return string(utf16.Decode(u))
}
