package hardware

import (
	"slices"
	"testing"
)

// The redfish hardware type offers Ironic's redfish vendor interface as its
// default and no-vendor; its methods are RedfishVendorPassthru's, with the
// HTTP methods and modes Ironic declares; no-vendor and an unknown
// interface have none; no interface has driver methods.
func TestVendorMethodsAreIronics(t *testing.T) {
	ht, _ := Lookup("redfish")
	if ht.Default(KindVendor) != Redfish || !ht.Supports(KindVendor, NoVendor) {
		t.Fatalf("redfish vendor interfaces %v", ht.Supported(KindVendor))
	}
	want := map[string]struct {
		http  string
		async bool
	}{
		"eject_vmedia": {"POST", true}, "create_subscription": {"POST", false}, "delete_subscription": {"DELETE", false},
		"get_subscription": {"GET", false}, "get_all_subscriptions": {"GET", false},
	}
	got := VendorOf(Redfish).Methods()
	if len(got) != len(want) {
		t.Fatalf("redfish methods %v", got)
	}
	for name, w := range want {
		m, ok := got[name]
		if !ok || !slices.Equal(m.HTTPMethods, []string{w.http}) || m.Async != w.async || !m.RequireExclusiveLock || m.Attach || m.Description == "" {
			t.Errorf("%s = %+v, want %s async=%v", name, m, w.http, w.async)
		}
	}
	if f := VendorOf(Fake).Methods(); len(f) != 3 || f["fourth_method_shared_lock"].RequireExclusiveLock || f["third_method_sync"].Async {
		t.Errorf("fake methods %+v", f)
	}
	for _, name := range []Interface{NoVendor, "ipmitool", Redfish, Fake} {
		if name != Redfish && name != Fake && len(VendorOf(name).Methods()) != 0 {
			t.Errorf("%s has methods", name)
		}
		if len(VendorOf(name).DriverMethods()) != 0 {
			t.Errorf("%s has driver methods", name)
		}
	}
	if !VendorOf(Fake).TouchesNoHardware() || VendorOf(Redfish).TouchesNoHardware() {
		t.Error("only the fake methods answer without hardware")
	}
	// The table handed out is a copy.
	got["create_subscription"].HTTPMethods[0] = "PUT"
	if VendorOf(Redfish).Methods()["create_subscription"].HTTPMethods[0] != "POST" {
		t.Error("Methods hands out the registry's own slices")
	}
}
