package agent

import (
	"bytes"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/ironflow/ironflow/agent/authenticode"
	"github.com/ironflow/ironflow/agent/fatfs"
)

// Before an instance's first boot under secure boot (install_bootloader
// with secure_boot true; docs/security.md, "Secure boot"), the agent checks
// the loader the firmware will start as the firmware will: its Authenticode
// signature must chain to a certificate of the firmware's db, and, when the
// loader is shim, the GRUB it starts (grubx64.efi next to it) must chain to
// db or to shim's built-in vendor certificate. A loader that would be
// refused ("Access Denied" on the console, a machine that never boots)
// fails the deploy here, with the file named, instead.

// efiDBPath is UEFI's db variable (EFI_IMAGE_SECURITY_DATABASE_GUID) in
// Linux's efivarfs: 4 bytes of attributes, then EFI_SIGNATURE_LISTs.
var efiDBPath = "/sys/firmware/efi/efivars/db-d719b2cb-3d3a-4596-a3bc-dad00e67656f"

// efiCertX509 is EFI_CERT_X509_GUID as it is stored (mixed-endian).
var efiCertX509 = []byte{0xa1, 0x59, 0xc0, 0xa5, 0xe4, 0x94, 0xa7, 0x4a, 0x87, 0xb5, 0xab, 0x15, 0x5c, 0x2b, 0xf0, 0x72}

// shimSecondStage is the loader shim starts from its own directory
// (shim's DEFAULT_LOADER).
const shimSecondStage = "grubx64.efi"

// secureBootTrust is what the firmware will trust: the X.509 certificates
// of its db when the agent can read them, else Microsoft's UEFI CAs, which
// every machine shipped with Microsoft's keys has in db. It says which.
func secureBootTrust() ([]*x509.Certificate, string) {
	if b, err := os.ReadFile(efiDBPath); err == nil && len(b) > 4 {
		if certs := parseSignatureLists(b[4:]); len(certs) > 0 {
			return certs, "the firmware's db"
		}
	}
	return authenticode.MicrosoftUEFICAs(), "Microsoft's UEFI CAs (the firmware's db is not readable from the agent)"
}

// parseSignatureLists returns the X.509 certificates of a sequence of
// EFI_SIGNATURE_LISTs (the UEFI specification's "Signature Database"):
// type GUID, list size, header size, signature size, header, then
// signatures, each an owner GUID and the data.
func parseSignatureLists(b []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for len(b) >= 28 {
		listSize := int(binary.LittleEndian.Uint32(b[16:]))
		headerSize := int(binary.LittleEndian.Uint32(b[20:]))
		sigSize := int(binary.LittleEndian.Uint32(b[24:]))
		if listSize < 28 || listSize > len(b) || sigSize <= 16 || 28+headerSize > listSize {
			return out
		}
		if bytes.Equal(b[:16], efiCertX509) {
			for s := b[28+headerSize : listSize]; len(s) >= sigSize; s = s[sigSize:] {
				if c, err := x509.ParseCertificate(s[16:sigSize]); err == nil {
					out = append(out, c)
				}
			}
		}
		b = b[listSize:]
	}
	return out
}

// verifySecureBootLoader checks the loader (a path on the ESP, as in the
// boot entry) and, for shim, its second stage. It returns what verified.
func verifySecureBootLoader(dev io.ReaderAt, disk string, esp UEFIPartition, loader string) (string, error) {
	trusted, source := secureBootTrust()
	refused := func(file string, err error) error {
		what := "is not signed (it carries no Authenticode signature)"
		switch {
		case errors.Is(err, fatfs.ErrNotExist):
			what = "does not exist"
		case errors.Is(err, authenticode.ErrUntrusted):
			what = fmt.Sprintf("is %v, not by a key of %s", err, source)
		case !errors.Is(err, authenticode.ErrNotSigned):
			what = fmt.Sprintf("has no valid signature (%v)", err)
		}
		return fmt.Errorf("Secure boot is enabled for the instance but its boot loader %s on %s (EFI system partition %d) %s: "+
			"the firmware would refuse to start it; deploy an image whose boot chain is signed (e.g. shim and a signed GRUB), "+
			"or deploy without the secure_boot capability", file, disk, esp.Number, what)
	}
	vol, err := fatfs.Open(dev, int64(esp.StartLBA)*sectorSize)
	if err != nil {
		return "", fmt.Errorf("secure boot: read the EFI system partition %d of %s: %w", esp.Number, disk, err)
	}
	first, err := vol.ReadFile(loader)
	if err != nil && !errors.Is(err, fatfs.ErrNotExist) {
		return "", fmt.Errorf("secure boot: %w", err)
	}
	if err != nil {
		return "", refused(loader, err)
	}
	s, err := authenticode.Verify(first, trusted)
	if err != nil {
		return "", refused(loader, err)
	}
	msg := fmt.Sprintf("%s is signed by %s (trusted through %s in %s)", loader, s.Subject, s.Anchor, source)
	vendor, err := authenticode.ShimVendorCertificates(first)
	if err != nil {
		return "", refused(loader, err)
	}
	if vendor == nil {
		return msg, nil
	}
	second := loader[:strings.LastIndexAny(loader, `\/`)+1] + shimSecondStage
	b, err := vol.ReadFile(second)
	if err != nil && !errors.Is(err, fatfs.ErrNotExist) {
		return "", fmt.Errorf("secure boot: %w", err)
	}
	if err != nil {
		return "", refused(second+" (shim's second stage)", err)
	}
	s2, err := authenticode.Verify(b, append(append([]*x509.Certificate(nil), trusted...), vendor...))
	if err != nil {
		return "", refused(second+" (shim's second stage)", err)
	}
	return fmt.Sprintf("%s; %s is signed by %s (trusted through %s)", msg, second, s2.Subject, s2.Anchor), nil
}
