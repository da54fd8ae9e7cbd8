package agent

import (
	"encoding/binary"
	"fmt"
	"time"
)

// ATA IDENTIFY DEVICE words erase decisions read, from the ATA Command
// Set (ACS-3) specification: word 82 (command sets supported), word 128
// (security status), words 89/90 (normal/enhanced erase time).
const (
	ataIdentifySize    = 512
	ataWordCmdSet      = 82
	ataWordEraseTime   = 89
	ataWordEnhTime     = 90
	ataWordSecurity    = 128
	ataCmdSetSecurity  = 1 << 1
	ataSecSupported    = 1 << 0
	ataSecEnabled      = 1 << 1
	ataSecLocked       = 1 << 2
	ataSecFrozen       = 1 << 3
	ataSecCountExpired = 1 << 4
	ataSecEnhanced     = 1 << 5
	// ataErasePassword is the user password IPA sets for the erase
	// ("NULL", as hdparm's --security-set-pass NULL).
	ataErasePassword = "NULL"
)

// ataSecurity is a drive's security state.
type ataSecurity struct {
	Supported, Enabled, Locked, Frozen, CountExpired, Enhanced bool
	// EraseTime is the drive's estimate for its (enhanced) erase; 0 when
	// it gives none.
	EraseTime, EnhancedTime time.Duration
}

func ataWord(id []byte, w int) uint16 { return binary.LittleEndian.Uint16(id[2*w:]) }

func parseATASecurity(id []byte) (ataSecurity, error) {
	if len(id) < ataIdentifySize {
		return ataSecurity{}, fmt.Errorf("identify device: %d bytes, want %d", len(id), ataIdentifySize)
	}
	sec := ataWord(id, ataWordSecurity)
	// A word of all ones or zeros is "not reported".
	if sec == 0xffff {
		sec = 0
	}
	s := ataSecurity{
		Supported:    sec&ataSecSupported != 0 && ataWord(id, ataWordCmdSet)&ataCmdSetSecurity != 0,
		Enabled:      sec&ataSecEnabled != 0,
		Locked:       sec&ataSecLocked != 0,
		Frozen:       sec&ataSecFrozen != 0,
		CountExpired: sec&ataSecCountExpired != 0,
		Enhanced:     sec&ataSecEnhanced != 0,
	}
	s.EraseTime = ataEraseTime(ataWord(id, ataWordEraseTime))
	s.EnhancedTime = ataEraseTime(ataWord(id, ataWordEnhTime))
	return s, nil
}

// ataEraseTime decodes words 89/90: bit 15 set is the extended format
// (bits 14:0), else bits 7:0; the value is in units of 2 minutes, its
// maximum meaning "longer than that".
func ataEraseTime(w uint16) time.Duration {
	v := uint32(w & 0xff)
	if w&0x8000 != 0 {
		v = uint32(w & 0x7fff)
	}
	return time.Duration(v) * 2 * time.Minute
}

// ataErasePlan is what an ATA security erase does, from IPA's _ata_erase
// checks: the drive must support the security feature set and not be
// frozen (a frozen drive refuses every security command until a power
// cycle; the BIOS usually freezes it at boot) nor have its password
// attempts used up. A drive already locked or with a password set (a
// previous failed erase) is unlocked with IPA's password first. The
// enhanced erase (which also erases reallocated sectors) is preferred.
type ataErasePlan struct {
	Unlock   bool
	Enhanced bool
	Timeout  time.Duration
	Method   string
}

// ataEraseMinTimeout is the least a security erase is given: drives that
// report no estimate still take a while.
const ataEraseMinTimeout = 2 * time.Hour

func planATAErase(s ataSecurity) (ataErasePlan, error) {
	switch {
	case !s.Supported:
		return ataErasePlan{}, fmt.Errorf("%w: the drive does not support the ATA security feature set", errNoSecureErase)
	case s.Frozen:
		return ataErasePlan{}, fmt.Errorf("%w: the drive's security is frozen (it accepts no security command until power-cycled)", errNoSecureErase)
	case s.CountExpired:
		return ataErasePlan{}, fmt.Errorf("%w: the drive's security password attempt counter has expired", errNoSecureErase)
	}
	p := ataErasePlan{Unlock: s.Enabled || s.Locked, Enhanced: s.Enhanced, Method: "ata_security_erase"}
	est := s.EraseTime
	if s.Enhanced {
		est, p.Method = s.EnhancedTime, "ata_enhanced_security_erase"
	}
	// Twice the drive's estimate, and never less than the minimum.
	p.Timeout = max(2*est, ataEraseMinTimeout)
	return p, nil
}

// ataPasswordBlock is the 512-byte data block of SECURITY SET PASSWORD,
// UNLOCK and ERASE UNIT: word 0 the control bits (identifier user = 0,
// bit 1 enhanced erase), words 1-16 the password.
func ataPasswordBlock(password string, control uint16) []byte {
	b := make([]byte, 512)
	binary.LittleEndian.PutUint16(b, control)
	copy(b[2:34], password)
	return b
}
