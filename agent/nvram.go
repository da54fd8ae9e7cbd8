package agent

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf16"
)

// UEFIBootEntry is one Boot#### variable, decoded.
type UEFIBootEntry struct {
	Num         uint16
	Description string
	// DevicePath is the loader's device path as text, in the UEFI
	// specification's device path to text style (HD(...)/File(...)).
	DevicePath string
}

// UEFIVariables is implemented by hardware whose UEFI boot entries can be
// listed and removed (efivarfs on Linux). Both return ErrNotUEFI on a
// machine booted in BIOS mode.
type UEFIVariables interface {
	UEFIBootEntries(ctx context.Context) ([]UEFIBootEntry, error)
	// DeleteUEFIBootEntry removes Boot#### and its BootOrder slot.
	DeleteUEFIBootEntry(ctx context.Context, num uint16) error
}

// PstoreEraser is implemented by hardware with a persistent store of
// kernel crash records (/sys/fs/pstore on Linux).
type PstoreEraser interface {
	// ErasePstore removes every record and returns their names.
	ErasePstore(ctx context.Context) ([]string, error)
}

// defaultNVRAMPatterns remove the entries deployments add: ironflow's own
// ("ironflow <disk>") and those an Ironic deploy or a previous tenant's
// image installed under the usual names.
var defaultNVRAMPatterns = []string{"(?i)^(ironflow|ironic)"}

// cleanUEFINVRAM is clean_uefi_nvram: remove every UEFI boot entry whose
// description or device path matches one of match_patterns.
func (a *Agent) cleanUEFINVRAM(ctx context.Context, _ *command, args, node map[string]any) (any, error) {
	s := newStepArgs(args, node)
	patterns := s.strings("match_patterns", defaultNVRAMPatterns)
	if s.err != nil {
		return nil, s.err
	}
	res := make([]*regexp.Regexp, 0, len(patterns))
	for _, p := range patterns {
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, newRESTError("InvalidCommandParamsError", 400, "Invalid command parameters", fmt.Sprintf("match_patterns: %q: %v", p, err))
		}
		res = append(res, re)
	}
	vars, ok := a.cfg.Hardware.(UEFIVariables)
	if !ok {
		return map[string]any{"removed": []string{}, "message": "this machine has no UEFI variables to clean"}, nil
	}
	entries, err := vars.UEFIBootEntries(ctx)
	if errors.Is(err, ErrNotUEFI) {
		return map[string]any{"removed": []string{}, "message": "the machine booted in BIOS mode: there is no UEFI NVRAM to clean"}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list UEFI boot entries: %w", err)
	}
	removed := []string{}
	for _, e := range entries {
		if !matchesAny(res, e.Description, e.DevicePath) {
			continue
		}
		if err := vars.DeleteUEFIBootEntry(ctx, e.Num); err != nil {
			return nil, fmt.Errorf("remove Boot%04X (%s): %w", e.Num, e.Description, err)
		}
		removed = append(removed, fmt.Sprintf("Boot%04X %s", e.Num, e.Description))
	}
	a.log.Info("cleaned UEFI NVRAM", "node", a.NodeUUID(), "removed", removed)
	return map[string]any{"removed": removed}, nil
}

func matchesAny(res []*regexp.Regexp, ss ...string) bool {
	for _, re := range res {
		for _, s := range ss {
			if s != "" && re.MatchString(s) {
				return true
			}
		}
	}
	return false
}

// erasePstore is erase_pstore: remove the kernel's persistent-store
// records (crash dumps of previous tenants' kernels).
func (a *Agent) erasePstore(ctx context.Context, _ *command, _, _ map[string]any) (any, error) {
	p, ok := a.cfg.Hardware.(PstoreEraser)
	if !ok {
		return map[string]any{"removed": []string{}, "message": "this machine has no pstore"}, nil
	}
	removed, err := p.ErasePstore(ctx)
	if err != nil {
		return nil, fmt.Errorf("erase pstore: %w", err)
	}
	a.log.Info("erased pstore", "node", a.NodeUUID(), "removed", removed)
	return map[string]any{"removed": removed}, nil
}

// parseLoadOption decodes an EFI_LOAD_OPTION (the UEFI specification's
// Load Options): attributes, device path length, NUL-terminated UTF-16
// description, device path.
func parseLoadOption(b []byte) (desc, path string, err error) {
	if len(b) < 6 {
		return "", "", errors.New("load option shorter than its header")
	}
	dpLen := int(binary.LittleEndian.Uint16(b[4:]))
	var u []uint16
	i := 6
	for ; i+1 < len(b); i += 2 {
		c := binary.LittleEndian.Uint16(b[i:])
		if c == 0 {
			break
		}
		u = append(u, c)
	}
	if i+1 >= len(b) {
		return "", "", errors.New("load option description not terminated")
	}
	i += 2
	if i+dpLen > len(b) {
		return "", "", errors.New("load option device path beyond its end")
	}
	return string(utf16.Decode(u)), devicePathText(b[i : i+dpLen]), nil
}

// devicePathText renders the device path nodes clean_uefi_nvram matches
// on: hard drive, file path, MAC, URI; others by type and subtype.
func devicePathText(dp []byte) string {
	var parts []string
	for len(dp) >= 4 {
		typ, sub := dp[0], dp[1]
		n := int(binary.LittleEndian.Uint16(dp[2:]))
		if n < 4 || n > len(dp) {
			break
		}
		body := dp[4:n]
		switch {
		case typ == 0x7f:
			return strings.Join(parts, "/")
		case typ == 0x04 && sub == 0x01 && len(body) >= 38:
			num := binary.LittleEndian.Uint32(body)
			if body[37] == 0x02 {
				parts = append(parts, fmt.Sprintf("HD(%d,GPT,%s)", num, efiGUIDText(body[20:36])))
			} else {
				parts = append(parts, fmt.Sprintf("HD(%d,MBR,0x%08X)", num, binary.LittleEndian.Uint32(body[20:])))
			}
		case typ == 0x04 && sub == 0x04:
			var u []uint16
			for j := 0; j+1 < len(body); j += 2 {
				if c := binary.LittleEndian.Uint16(body[j:]); c != 0 {
					u = append(u, c)
				}
			}
			parts = append(parts, "File("+string(utf16.Decode(u))+")")
		case typ == 0x03 && sub == 0x0b && len(body) >= 6:
			parts = append(parts, fmt.Sprintf("MAC(%x)", body[:6]))
		case typ == 0x03 && sub == 0x18:
			parts = append(parts, "Uri("+string(body)+")")
		default:
			parts = append(parts, fmt.Sprintf("Path(%d,%d)", typ, sub))
		}
		dp = dp[n:]
	}
	return strings.Join(parts, "/")
}

// efiGUIDText prints an EFI GUID (first three fields little-endian).
func efiGUIDText(b []byte) string {
	return fmt.Sprintf("%08x-%04x-%04x-%x-%x", binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint16(b[4:]),
		binary.LittleEndian.Uint16(b[6:]), b[8:10], b[10:16])
}
