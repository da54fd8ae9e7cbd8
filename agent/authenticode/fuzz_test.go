package authenticode

import (
	"os"
	"testing"
)

// FuzzVerify: any bytes (a loader from an image a user supplied) are
// verified or refused without a panic, and nothing unsigned is reported
// as signed. Seeded with Debian's small signed fallback loader when it is
// installed.
func FuzzVerify(f *testing.F) {
	f.Add([]byte("MZ"))
	if b, err := os.ReadFile("/usr/lib/shim/fbx64.efi.signed"); err == nil {
		f.Add(b)
	}
	trusted := MicrosoftUEFICAs()
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Verify(b, trusted)
		if err == nil && s.Subject == "" {
			t.Fatalf("verified with no signer: %+v", s)
		}
		_, _ = ShimVendorCertificates(b)
	})
}
