package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/ironflow/ironflow/internal/testkit/storetest"
	"github.com/ironflow/ironflow/store"
)

func TestBIOSSettingsCacheLikeIronic(t *testing.T) {
	s := storetest.New(t)
	ctx := context.Background()
	n := newNode(t, s, &store.Node{})
	enum := "Enumeration"
	first := []store.BIOSSetting{
		{Name: "ProcSMT", Value: "Enabled", AttributeType: &enum, AllowableValues: []string{"Enabled", "Disabled"}, ReadOnly: ptr(false)},
		{Name: "ProcCores", Value: "2", LowerBound: ptr(int64(1)), UpperBound: ptr(int64(8))},
		{Name: "Gone", Value: "x"},
	}
	if err := s.ReplaceBIOSSettings(ctx, n.UUID, first); err != nil {
		t.Fatal(err)
	}
	list, err := s.ListBIOSSettings(ctx, n.UUID)
	if err != nil || len(list) != 3 || list[0].Name != "Gone" || list[2].Name != "ProcSMT" {
		t.Fatalf("list = %+v, %v", list, err)
	}
	if smt := list[2]; *smt.AttributeType != "Enumeration" || len(smt.AllowableValues) != 2 || *smt.ReadOnly || smt.UpdatedAt != nil {
		t.Fatalf("ProcSMT = %+v", smt)
	}
	second := []store.BIOSSetting{first[0], {Name: "ProcCores", Value: "4", LowerBound: ptr(int64(1)), UpperBound: ptr(int64(8))}}
	if err := s.ReplaceBIOSSettings(ctx, n.UUID, second); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetBIOSSetting(ctx, n.UUID, "Gone"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a setting the BMC no longer reports: %v, want ErrNotFound", err)
	}
	cores, err := s.GetBIOSSetting(ctx, n.UUID, "ProcCores")
	if err != nil || cores.Value != "4" || cores.UpdatedAt == nil || *cores.UpperBound != 8 {
		t.Fatalf("ProcCores = %+v, %v", cores, err)
	}
	if smt, _ := s.GetBIOSSetting(ctx, n.UUID, "ProcSMT"); smt.UpdatedAt != nil {
		t.Errorf("an unchanged setting was updated: %+v", smt)
	}
	if err := s.ReplaceBIOSSettings(ctx, "9c3ab7a4-1a77-4d3e-9d55-2d7e4f1f0001", first); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing node: %v", err)
	}
	if err := s.DeleteNode(ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	if list, _ := s.ListBIOSSettings(ctx, n.UUID); len(list) != 0 {
		t.Fatalf("settings outlive their node: %+v", list)
	}
}
