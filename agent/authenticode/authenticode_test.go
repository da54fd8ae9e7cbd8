package authenticode

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// Debian's signed shim and GRUB (packages shim-signed and
// grub-efi-amd64-signed) are the real-world inputs: Microsoft signs shim,
// Debian signs GRUB with the key shim carries.
const (
	shimSigned = "/usr/lib/shim/shimx64.efi.signed"
	grubSigned = "/usr/lib/grub/x86_64-efi-signed/grubx64.efi.signed"
	fbUnsigned = "/usr/lib/shim/fbx64.efi"
)

func readOrSkip(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("SKIPPING: %s missing (scripts/install-deps.sh installs shim-signed and grub-efi-amd64-signed): %v", path, err)
	}
	return b
}

func TestShimChainsToMicrosoftUEFICA(t *testing.T) {
	s, err := Verify(readOrSkip(t, shimSigned), MicrosoftUEFICAs())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(s.Anchor, "Microsoft") || !strings.Contains(s.Subject, "Microsoft") {
		t.Errorf("shim verified as %+v, want a Microsoft signer and anchor", s)
	}
	t.Logf("shim: signed by %s, trusted through %s", s.Subject, s.Anchor)
}

func TestGRUBVerifiesWithShimsVendorCertificateOnly(t *testing.T) {
	shim, grub := readOrSkip(t, shimSigned), readOrSkip(t, grubSigned)
	vendor, err := ShimVendorCertificates(shim)
	if err != nil || len(vendor) != 1 {
		t.Fatalf("shim's vendor certificate: %v, %v", vendor, err)
	}
	if _, err := Verify(grub, MicrosoftUEFICAs()); !errors.Is(err, ErrUntrusted) {
		t.Errorf("GRUB against Microsoft's CAs alone: %v, want ErrUntrusted", err)
	}
	s, err := Verify(grub, append(MicrosoftUEFICAs(), vendor...))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("GRUB: signed by %s, trusted through shim's %s", s.Subject, s.Anchor)
}

func TestAnUnsignedLoaderIsNotSigned(t *testing.T) {
	if _, err := Verify(readOrSkip(t, fbUnsigned), MicrosoftUEFICAs()); !errors.Is(err, ErrNotSigned) {
		t.Errorf("unsigned fallback loader: %v, want ErrNotSigned", err)
	}
	if vendor, err := ShimVendorCertificates(readOrSkip(t, grubSigned)); err != nil || vendor != nil {
		t.Errorf("GRUB is not shim: %v, %v", vendor, err)
	}
}

func TestATamperedShimFails(t *testing.T) {
	b := readOrSkip(t, shimSigned)
	l, err := layout(b)
	if err != nil {
		t.Fatal(err)
	}
	// One byte of code changed after signing.
	b[l.sections[0][0]+100] ^= 0xff
	if _, err := Verify(b, MicrosoftUEFICAs()); err == nil || errors.Is(err, ErrUntrusted) || errors.Is(err, ErrNotSigned) {
		t.Errorf("tampered shim: %v, want a digest mismatch", err)
	}
}

func TestGarbageIsNotAPEImage(t *testing.T) {
	if _, err := Verify([]byte("MZ not really"), nil); err == nil || errors.Is(err, ErrNotSigned) {
		t.Errorf("garbage: %v, want a malformed-image error", err)
	}
}

func TestTheEmbeddedCAsParse(t *testing.T) {
	if n := len(MicrosoftUEFICAs()); n != 3 {
		t.Errorf("%d embedded certificates, want 3", n)
	}
}
