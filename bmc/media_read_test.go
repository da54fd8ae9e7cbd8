package bmc

import (
	"context"
	"slices"
	"testing"
)

// ReadMedia lists every virtual media device of a recorded iLO, the CD
// showing what InsertMedia put in, and nothing after an eject.
func TestRedfishReadMediaListsTheDevices(t *testing.T) {
	b := startBMC(t, "hpe-ilo-dl325", nil)
	d := newTestRedfish(t, b.info(nil))
	ctx := context.Background()
	r, ok := d.(MediaReader)
	if !ok {
		t.Fatal("the redfish driver is not a MediaReader")
	}
	cd := func() MediaDevice {
		t.Helper()
		devs, err := r.ReadMedia(ctx)
		if err != nil {
			t.Fatalf("ReadMedia: %v", err)
		}
		for _, dv := range devs {
			if slices.Contains(dv.MediaTypes, "CD") || slices.Contains(dv.MediaTypes, "DVD") {
				return dv
			}
		}
		t.Fatalf("no CD among %+v", devs)
		return MediaDevice{}
	}
	if got := cd(); got.Inserted {
		t.Fatalf("CD inserted before any insert: %+v", got)
	}
	if err := d.InsertMedia(ctx, "http://images.example/read.iso"); err != nil {
		t.Fatalf("InsertMedia: %v", err)
	}
	if got := cd(); !got.Inserted || got.Image != "http://images.example/read.iso" {
		t.Fatalf("after insert: %+v", got)
	}
	if err := d.EjectMedia(ctx); err != nil {
		t.Fatalf("EjectMedia: %v", err)
	}
	if got := cd(); got.Inserted {
		t.Fatalf("after eject: %+v", got)
	}
}

// The fake driver's one CD follows its inserts.
func TestFakeReadMedia(t *testing.T) {
	d, err := newFake(map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := d.InsertMedia(ctx, "http://images.example/fake.iso"); err != nil {
		t.Fatal(err)
	}
	devs, err := d.(MediaReader).ReadMedia(ctx)
	if err != nil || len(devs) != 1 || !devs[0].Inserted || devs[0].ImageName != "fake.iso" {
		t.Fatalf("ReadMedia = %+v, %v", devs, err)
	}
}
