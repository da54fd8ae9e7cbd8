package bmc

import (
	"context"
	"testing"

	"github.com/ironflow/ironflow/metrics"
)

func TestVendorLabelIsBounded(t *testing.T) {
	for in, want := range map[string]string{
		"Dell Inc.": "dell", "HPE": "hpe", "Hewlett Packard Enterprise": "hpe", "HP": "hpe",
		"Supermicro": "supermicro", "Lenovo": "lenovo", "FUJITSU": "fujitsu", "Cisco Systems Inc.": "cisco",
		"ironflow": "ironflow", "Contoso": "other", "QEMU": "other", "Hyperscaler (HPC) Inc.": "other",
		"": "unknown", "  ": "unknown",
	} {
		if got := VendorLabel(in); got != want {
			t.Errorf("VendorLabel(%q) = %q, want %q", in, got, want)
		}
	}
	all := map[string]bool{}
	for _, v := range Vendors() {
		all[v] = true
	}
	if len(all) != 12 || !all["other"] || !all["unknown"] {
		t.Errorf("Vendors() = %v", Vendors())
	}
}

// bmcCalls sums ironflow_bmc_calls_total of the redfish driver for a
// vendor and outcome, from the process's registry.
func bmcCalls(t *testing.T, vendor, outcome string) float64 {
	t.Helper()
	fams, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, f := range fams {
		if f.GetName() != "ironflow_bmc_calls_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["driver"] == "redfish" && l["vendor"] == vendor && l["outcome"] == outcome {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// The BMC calls of the recorded vendor services are counted under their
// makers: HPE's iLO by its service root's Vendor, DMTF's Contoso system
// (no Vendor in its service root) by its Manufacturer, outside the list;
// and a BMC that stops answering is still counted under its maker.
func TestBMCCallsAreCountedByVendor(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ dir, vendor string }{
		{"hpe-ilo-dl325", "hpe"},
		{"dmtf-public-rackmount1", "other"},
	} {
		t.Run(c.dir, func(t *testing.T) {
			b := startBMC(t, c.dir, nil)
			d := newTestRedfish(t, b.info(map[string]any{"redfish_connection_attempts": 1}))
			ok := bmcCalls(t, c.vendor, metrics.OutcomeOK)
			if _, err := d.PowerState(ctx); err != nil {
				t.Fatalf("PowerState: %v", err)
			}
			if vendorOf(b.srv.URL) != c.vendor {
				t.Fatalf("vendor of %s = %q, want %q", c.dir, vendorOf(b.srv.URL), c.vendor)
			}
			if n := bmcCalls(t, c.vendor, metrics.OutcomeOK); n <= ok {
				t.Fatalf("ok calls under vendor %s: %v before, %v after", c.vendor, ok, n)
			}
			unreachable := bmcCalls(t, c.vendor, metrics.OutcomeUnreachable)
			b.srv.Close()
			if _, err := d.PowerState(ctx); err == nil {
				t.Fatal("PowerState of a closed BMC succeeded")
			}
			if n := bmcCalls(t, c.vendor, metrics.OutcomeUnreachable); n != unreachable+1 {
				t.Fatalf("unreachable calls under vendor %s: %v before, %v after", c.vendor, unreachable, n)
			}
		})
	}
}
