package store_test

import (
	"context"
	"testing"

	"github.com/ironflow/ironflow/internal/testkit/storetest"
	"github.com/ironflow/ironflow/store"
)

// TestFirmwareComponentsKeepTheirInitialVersion: the first sync records
// initial = current; a changed version becomes current and last flashed,
// the initial one stays; an unchanged one is not touched.
func TestFirmwareComponentsKeepTheirInitialVersion(t *testing.T) {
	s := storetest.New(t)
	ctx := context.Background()
	n := &store.Node{Driver: "redfish", ProvisionState: "manageable"}
	if err := s.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	if err := s.SyncFirmwareComponents(ctx, n.UUID, map[string]string{"bios": "1.0", "bmc": "5.1"}); err != nil {
		t.Fatal(err)
	}
	if err := s.SyncFirmwareComponents(ctx, n.UUID, map[string]string{"bios": "2.0", "bmc": "5.1"}); err != nil {
		t.Fatal(err)
	}
	got, err := s.ListFirmwareComponents(ctx, n.UUID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("components = %+v", got)
	}
	bios, bmc := got[0], got[1]
	if bios.Component != "bios" || bios.InitialVersion != "1.0" || bios.CurrentVersion != "2.0" ||
		bios.LastVersionFlashed == nil || *bios.LastVersionFlashed != "2.0" || bios.UpdatedAt == nil {
		t.Errorf("bios = %+v, want initial 1.0, current and last flashed 2.0, updated", bios)
	}
	if bmc.InitialVersion != "5.1" || bmc.CurrentVersion != "5.1" || bmc.LastVersionFlashed != nil || bmc.UpdatedAt != nil {
		t.Errorf("bmc = %+v, want untouched 5.1", bmc)
	}
}
