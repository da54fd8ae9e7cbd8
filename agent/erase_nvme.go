package agent

import (
	"encoding/binary"
	"fmt"
)

// NVMe identify data and command fields, from the NVM Express Base
// Specification (Identify Controller and Identify Namespace data
// structures, Format NVM and Sanitize commands).
const (
	nvmeIdentifySize = 4096
	nvmeOffOACS      = 256 // Optional Admin Command Support, 2 bytes
	nvmeOffSANICAP   = 328 // Sanitize Capabilities, 4 bytes
	nvmeOffFNA       = 524 // Format NVM Attributes, 1 byte
	nvmeOffFLBAS     = 26  // namespace: Formatted LBA Size
	nvmeOffDPS       = 29  // namespace: End-to-end Data Protection Type Settings

	nvmeOACSFormat   = 1 << 1
	nvmeOACSSanitize = 1 << 3
	// nvmeFNASecureErase and nvmeFNACrypto are the bits IPA's _nvme_erase
	// reads from `nvme id-ctrl`'s fna: a secure erase applies to the whole
	// controller, and a cryptographic erase is supported.
	nvmeFNASecureErase = 1 << 1
	nvmeFNACrypto      = 1 << 2
	nvmeSaniCrypto     = 1 << 0
	nvmeSaniBlock      = 1 << 1

	// Secure Erase Settings of Format NVM (CDW10 bits 11:9).
	nvmeSESUserData = 1
	nvmeSESCrypto   = 2
	// Sanitize Actions (CDW10 bits 2:0).
	nvmeSanActBlock  = 2
	nvmeSanActCrypto = 4
)

// nvmeController is what erase decisions need of Identify Controller.
type nvmeController struct {
	OACS    uint16
	SANICAP uint32
	FNA     uint8
}

func parseNVMeController(id []byte) (nvmeController, error) {
	if len(id) < nvmeIdentifySize {
		return nvmeController{}, fmt.Errorf("identify controller: %d bytes, want %d", len(id), nvmeIdentifySize)
	}
	return nvmeController{
		OACS:    binary.LittleEndian.Uint16(id[nvmeOffOACS:]),
		SANICAP: binary.LittleEndian.Uint32(id[nvmeOffSANICAP:]),
		FNA:     id[nvmeOffFNA],
	}, nil
}

// nvmeErasePlan is the admin command an erase sends.
type nvmeErasePlan struct {
	// Format: Format NVM with SES; otherwise Sanitize with SanAct.
	Format bool
	SES    uint32
	SanAct uint32
	Method string
}

// planNVMeErase decides as IPA's _nvme_erase does: a cryptographic erase
// when the controller has one (FNA bit 2), else a user-data erase when a
// secure erase covers the controller (FNA bit 1), both through Format NVM
// (which the controller must support, OACS bit 1). A controller without a
// usable Format but with Sanitize (OACS bit 3) is sanitized instead:
// crypto erase, else block erase. Anything else has no secure erase.
func planNVMeErase(c nvmeController) (nvmeErasePlan, error) {
	if c.OACS&nvmeOACSFormat != 0 {
		switch {
		case c.FNA&nvmeFNACrypto != 0:
			return nvmeErasePlan{Format: true, SES: nvmeSESCrypto, Method: "nvme_format_crypto_erase"}, nil
		case c.FNA&nvmeFNASecureErase != 0:
			return nvmeErasePlan{Format: true, SES: nvmeSESUserData, Method: "nvme_format_user_data_erase"}, nil
		}
	}
	if c.OACS&nvmeOACSSanitize != 0 {
		switch {
		case c.SANICAP&nvmeSaniCrypto != 0:
			return nvmeErasePlan{SanAct: nvmeSanActCrypto, Method: "nvme_sanitize_crypto_erase"}, nil
		case c.SANICAP&nvmeSaniBlock != 0:
			return nvmeErasePlan{SanAct: nvmeSanActBlock, Method: "nvme_sanitize_block_erase"}, nil
		}
	}
	return nvmeErasePlan{}, fmt.Errorf("%w: the NVMe controller offers neither a secure-erase Format NVM nor a crypto/block Sanitize (OACS %#x, FNA %#x, SANICAP %#x)",
		errNoSecureErase, c.OACS, c.FNA, c.SANICAP)
}

// nvmeFormatCDW10 is Format NVM's CDW10 keeping the namespace's current
// LBA format, metadata setting and protection information (from Identify
// Namespace), with ses as the Secure Erase Setting.
func nvmeFormatCDW10(idns []byte, ses uint32) (uint32, error) {
	if len(idns) < nvmeIdentifySize {
		return 0, fmt.Errorf("identify namespace: %d bytes, want %d", len(idns), nvmeIdentifySize)
	}
	flbas := uint32(idns[nvmeOffFLBAS])
	dps := uint32(idns[nvmeOffDPS])
	lbafLow := flbas & 0xf
	mset := (flbas >> 4) & 1
	lbafHigh := (flbas >> 5) & 3
	pi := dps & 7
	pil := (dps >> 3) & 1
	return lbafLow | mset<<4 | pi<<5 | pil<<8 | (ses&7)<<9 | lbafHigh<<12, nil
}

// Sanitize Status log page (log identifier 81h): SSTAT bits 2:0.
const (
	nvmeLogSanitize       = 0x81
	nvmeSanitizeNever     = 0
	nvmeSanitizeSucceeded = 1
	nvmeSanitizeRunning   = 2
	nvmeSanitizeFailed    = 3
	nvmeSanitizeNoDealloc = 4
)

// sanitizeStatus reads a Sanitize Status log page: progress (of 65536)
// and state.
func sanitizeStatus(log []byte) (progress uint16, state uint16, err error) {
	if len(log) < 4 {
		return 0, 0, fmt.Errorf("sanitize status log: %d bytes", len(log))
	}
	return binary.LittleEndian.Uint16(log[0:]), binary.LittleEndian.Uint16(log[2:]) & 7, nil
}
