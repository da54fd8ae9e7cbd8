package hardware

import "testing"

// TestRedfishBIOSIsAdvertisedByRedfishOnly: the redfish bios interface
// (bmc/redfish_bios.go) is offered by the redfish hardware type, no-bios
// staying its default; ipmi cannot reach a Redfish BIOS.
func TestRedfishBIOSIsAdvertisedByRedfishOnly(t *testing.T) {
	if _, ok := Implemented(KindBIOS, Redfish); !ok {
		t.Fatal("bios redfish has no implementation")
	}
	rf, _ := Lookup("redfish")
	if !rf.Supports(KindBIOS, Redfish) || rf.Interfaces[KindBIOS][0] != NoBIOS {
		t.Errorf("redfish bios interfaces %v, want no-bios (default) and redfish", rf.Interfaces[KindBIOS])
	}
	if ipmi, _ := Lookup("ipmi"); ipmi.Supports(KindBIOS, Redfish) {
		t.Error("ipmi advertises bios interface redfish")
	}
}
