package bmc

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestRedfishBootModeSwitchOnRecordedLayouts(t *testing.T) {
	for _, tc := range []struct{ dir, bios, settings, registry string }{
		{"dmtf-public-rackmount1", dmtfBios, dmtfSettings, "BiosAttributeRegistryP89.v1_0_0"},
		{"hpe-ilo-dl325", hpeBios, hpeSettings, "BiosAttributeRegistryA43.v1_2_52"},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			b := startBIOSBMC(t, tc.dir, tc.bios, tc.settings, tc.registry)
			d, err := New("redfish", b.info(nil))
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			bm := d.(BootModeSetter)
			ctx := context.Background()
			for _, mode := range []BootMode{BootModeBIOS, BootModeUEFI} {
				if err := bm.SetBootMode(ctx, mode); err != nil {
					t.Fatalf("set %s: %v", mode, err)
				}
				if got, err := bm.BootMode(ctx); err != nil || got != mode {
					t.Fatalf("boot mode %q %v, want %s", got, err, mode)
				}
			}
			sb := d.(SecureBooter)
			if on, err := sb.SecureBoot(ctx); err != nil || on {
				t.Fatalf("recorded secure boot %v %v, want off", on, err)
			}
			if err := sb.SetSecureBoot(ctx, true); err != nil {
				t.Fatal(err)
			}
			if on, err := sb.SecureBoot(ctx); err != nil || !on {
				t.Fatalf("secure boot %v %v after enabling", on, err)
			}
		})
	}
}

func TestRedfishBootModeFaults(t *testing.T) {
	ctx := context.Background()
	b := startBIOSBMC(t, "dmtf-public-rackmount1", dmtfBios, dmtfSettings, "BiosAttributeRegistryP89.v1_0_0")
	b.rejectBootMode = true
	b.rejectSecureBoot = true
	d, err := New("redfish", b.info(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.(BootModeSetter).SetBootMode(ctx, BootModeBIOS); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "BootSourceOverrideMode is a read only property") {
		t.Errorf("boot mode refused: %v", err)
	}
	if err := d.(SecureBooter).SetSecureBoot(ctx, true); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "SecureBootEnable is a read only property") {
		t.Errorf("secure boot refused: %v", err)
	}
	// A system without SecureBoot.
	b.mu.Lock()
	delete(b.docs[b.systemPath()], "SecureBoot")
	b.mu.Unlock()
	if _, err := d.(SecureBooter).SecureBoot(ctx); !errors.Is(err, ErrUnsupported) {
		t.Errorf("no SecureBoot resource: %v", err)
	}
}
