package bmc

import (
	"context"
	"errors"
	"testing"
)

// TestRedfishHealthFromRecordedServices: the redfish driver reads the
// system's Status.Health from DMTF's and HPE's recorded services (both
// say OK), follows a change of it, and reads a Status without Health or a
// value outside Ironic's three as unknown.
func TestRedfishHealthFromRecordedServices(t *testing.T) {
	for _, dir := range []string{"dmtf-public-rackmount1", "hpe-ilo-dl325"} {
		t.Run(dir, func(t *testing.T) {
			b := startBMC(t, dir, nil)
			d, err := New("redfish", b.info(nil))
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			hr, ok := d.(HealthReader)
			if !ok {
				t.Fatal("the redfish driver is not a HealthReader")
			}
			ctx := context.Background()
			read := func() Health {
				t.Helper()
				h, err := hr.Health(ctx)
				if err != nil {
					t.Fatalf("read health: %v", err)
				}
				return h
			}
			if h := read(); h != HealthOK {
				t.Errorf("recorded health: %q, want OK", h)
			}
			sys := b.systemPath()
			for _, c := range []struct {
				status map[string]any
				want   Health
			}{
				{map[string]any{"State": "Enabled", "Health": "Warning"}, HealthWarning},
				{map[string]any{"State": "Enabled", "Health": "Critical", "HealthRollup": "Critical"}, HealthCritical},
				{map[string]any{"State": "Enabled"}, HealthUnknown},
				{map[string]any{"State": "Enabled", "Health": "Degraded"}, HealthUnknown},
				{map[string]any{"State": "Enabled", "Health": "OK"}, HealthOK},
			} {
				b.set(sys, "Status", c.status)
				if h := read(); h != c.want {
					t.Errorf("Status %v: health %q, want %q", c.status, h, c.want)
				}
			}
		})
	}
}

// TestHealthReaders: IPMI reads no health (not a HealthReader); the fake
// reads fake_health and, without it, says it cannot.
func TestHealthReaders(t *testing.T) {
	d := newTestIPMI(t, map[string]any{"ipmi_address": "127.0.0.1", "ipmi_username": "u", "ipmi_password": "p"})
	if _, ok := d.(HealthReader); ok {
		t.Error("the ipmi driver is a HealthReader")
	}
	ctx := context.Background()
	f, err := New("fake-hardware", map[string]any{"fake_id": t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	if h, err := f.(HealthReader).Health(ctx); !errors.Is(err, ErrUnsupported) {
		t.Errorf("fake without fake_health: %q, %v; want ErrUnsupported", h, err)
	}
	f, err = New("fake-hardware", map[string]any{"fake_id": t.Name(), "fake_health": "Critical"})
	if err != nil {
		t.Fatal(err)
	}
	if h, err := f.(HealthReader).Health(ctx); err != nil || h != HealthCritical {
		t.Errorf("fake with fake_health Critical: %q, %v", h, err)
	}
	if _, err := New("fake-hardware", map[string]any{"fake_health": "Degraded"}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("fake_health Degraded: %v, want ErrInvalidConfig", err)
	}
}
