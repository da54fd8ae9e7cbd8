package hardware

import (
	"slices"
	"strings"
	"testing"
)

// TestEveryAdvertisedInterfaceIsImplemented walks the registry: every
// interface a hardware type advertises, default first, resolves to an
// Implementation (the code that serves it) whose capability the type has,
// and every kind has an answer.
func TestEveryAdvertisedInterfaceIsImplemented(t *testing.T) {
	names := Names()
	for _, want := range []string{"fake-hardware", "ipmi", "redfish"} {
		if !slices.Contains(names, want) {
			t.Fatalf("hardware type %s not registered: %v", want, names)
		}
	}
	for _, name := range names {
		ht, _ := Lookup(name)
		for _, kind := range Kinds() {
			ifs := ht.Supported(kind)
			if len(ifs) == 0 || ht.Default(kind) != ifs[0] {
				t.Errorf("%s: %s interfaces %v, default %q", name, kind, ifs, ht.Default(kind))
			}
			for _, iface := range ifs {
				impl, ok := Implemented(kind, iface)
				if !ok {
					t.Errorf("%s advertises %s interface %q that nothing implements", name, kind, iface)
					continue
				}
				if impl.Kind != kind || impl.Name != iface || impl.Served == "" {
					t.Errorf("%s: implementation of %s %q is %+v", name, kind, iface, impl)
				}
				if impl.Needs != "" && !ht.Has(impl.Needs) {
					t.Errorf("%s: %s %q needs %s", name, kind, iface, impl.Needs)
				}
			}
		}
		if err := Check(ht); err != nil {
			t.Errorf("Check(%s): %v", name, err)
		}
	}
}

// TestUnimplementedInterfacesAreNotAdvertised: interfaces Ironic has whose
// behaviour ironflow does not run are advertised by no hardware type.
func TestUnimplementedInterfacesAreNotAdvertised(t *testing.T) {
	for _, c := range []struct {
		kind  Kind
		iface Interface
	}{
		{KindVendor, IPMITool},
	} {
		if _, ok := Implemented(c.kind, c.iface); ok {
			t.Errorf("%s %s has an implementation", c.kind, c.iface)
		}
		for _, name := range Names() {
			if ht, _ := Lookup(name); ht.Supports(c.kind, c.iface) {
				t.Errorf("%s advertises %s interface %s", name, c.kind, c.iface)
			}
		}
	}
}

// TestAgentRAIDIsAdvertisedNeverTheDefault: software RAID through the
// agent (agent/raid.go) is accepted as raid_interface=agent by every
// hardware type, as Ironic's generic hardware offers AgentRAID, and is
// nobody's default.
func TestAgentRAIDIsAdvertisedNeverTheDefault(t *testing.T) {
	if _, ok := Implemented(KindRAID, Agent); !ok {
		t.Fatal("raid agent has no implementation")
	}
	for _, name := range []string{"ipmi", "redfish", "fake-hardware"} {
		ht, _ := Lookup(name)
		if !ht.Supports(KindRAID, Agent) || ht.Default(KindRAID) == Agent {
			t.Errorf("%s: raid agent supported %v, default %s", name, ht.Supports(KindRAID, Agent), ht.Default(KindRAID))
		}
	}
}

// TestAgentRescueIsAdvertisedWithNoRescueTheDefault: rescue through the
// agent is implemented (workflows RescueNode, UnrescueNode); no-rescue stays
// the default of the real hardware types, fake the default of fake-hardware.
func TestAgentRescueIsAdvertisedWithNoRescueTheDefault(t *testing.T) {
	if impl, ok := Implemented(KindRescue, Agent); !ok || RescueOf(Agent).Method() != RescueAgent {
		t.Fatalf("rescue agent: %+v %v", impl, ok)
	}
	if RescueOf(NoRescue).Supported() || !RescueOf(Fake).Supported() || RescueOf(Fake).Method() != RescueNothing {
		t.Fatal("no-rescue must refuse, fake must rescue without booting")
	}
	for name, def := range map[string]Interface{"ipmi": NoRescue, "redfish": NoRescue, "fake-hardware": Fake} {
		ht, _ := Lookup(name)
		if !ht.Supports(KindRescue, Agent) || ht.Default(KindRescue) != def {
			t.Errorf("%s: rescue agent supported %v, default %s (want %s)", name, ht.Supports(KindRescue, Agent), ht.Default(KindRescue), def)
		}
	}
}

func TestCheckRefusesAnUnimplementedInterface(t *testing.T) {
	ht, _ := Lookup("redfish")
	bad := *ht
	bad.Name = "bad"
	bad.Interfaces = map[Kind][]Interface{}
	for k, v := range ht.Interfaces {
		bad.Interfaces[k] = v
	}
	bad.Interfaces[KindVendor] = []Interface{IPMITool, NoVendor}
	if err := Check(&bad); err == nil || !strings.Contains(err.Error(), `vendor interface "ipmitool" is not implemented`) {
		t.Fatalf("Check = %v", err)
	}
	bad.Interfaces[KindVendor] = ht.Interfaces[KindVendor]
	bad.Interfaces[KindRAID] = []Interface{NoRAID}
	bad.Capabilities = nil
	if err := Check(&bad); err == nil || !strings.Contains(err.Error(), "needs capability") {
		t.Fatalf("Check without virtual media = %v", err)
	}
	bad.Capabilities = ht.Capabilities
	delete(bad.Interfaces, KindRAID)
	if err := Check(&bad); err == nil || !strings.Contains(err.Error(), "no raid interface") {
		t.Fatalf("Check without raid = %v", err)
	}
}

func TestKeys(t *testing.T) {
	ht, _ := Lookup("ipmi")
	if got := ht.Required(); !slices.Equal(got, []string{"ipmi_address"}) {
		t.Errorf("ipmi required %v", got)
	}
	// The boot interfaces' agent images come on top of the BMC's keys.
	if p := ht.Properties(); p[KeyDeployKernel] == "" || p["ipmi_password"] == "" || p[KeyPowerStateTimeout] == "" {
		t.Errorf("ipmi properties %v", p)
	}
	if got := ht.Missing(map[string]any{"ipmi_address": " "}); !slices.Equal(got, []string{"ipmi_address"}) {
		t.Errorf("missing with a blank address: %v", got)
	}
	if got := ht.Missing(map[string]any{"ipmi_address": 10.0}); got != nil {
		t.Errorf("missing with a numeric address: %v", got)
	}
	for _, name := range Names() {
		ht, _ := Lookup(name)
		for _, k := range ht.AllKeys() {
			if !strings.HasSuffix(k.Description, "Required.") && !strings.HasSuffix(k.Description, "Optional.") ||
				strings.HasSuffix(k.Description, "Required.") != k.Required {
				t.Errorf("%s key %s: description %q does not end as Required %v says", name, k.Name, k.Description, k.Required)
			}
		}
	}
}

func TestBehaviourQueries(t *testing.T) {
	if !BootOf(RedfishVirtualMedia).VirtualMedia() || BootOf(IPXE).VirtualMedia() || BootOf("unknown").VirtualMedia() {
		t.Error("virtual media")
	}
	for iface, flow := range map[Interface]DeployFlow{Direct: FlowAgent, Ramdisk: FlowRamdisk, Anaconda: FlowInstaller, Fake: FlowNone} {
		if got := DeployOf(iface).Flow(); got != flow {
			t.Errorf("deploy %s flow %v, want %v", iface, got, flow)
		}
		if DeployOf(iface).WritesDisk() != (flow != FlowNone) {
			t.Errorf("deploy %s WritesDisk", iface)
		}
	}
	for iface, m := range map[Interface]InspectMethod{Redfish: InspectOutOfBand, Agent: InspectInBand, Fake: InspectNothing, NoInspect: InspectNothing} {
		if got := InspectOf(iface).Method(); got != m {
			t.Errorf("inspect %s method %v, want %v", iface, got, m)
		}
	}
}

// TestCapabilityQuestions: what the API, the activities and the workflows
// ask of a hardware type or an interface instead of comparing its name.
func TestCapabilityQuestions(t *testing.T) {
	for name, want := range map[string]struct{ secureBoot, asAsked, vmedia, vmediaNoop bool }{
		"ipmi":          {false, false, false, false},
		"redfish":       {true, false, true, true},
		"fake-hardware": {true, true, true, false},
	} {
		ht, _ := Lookup(name)
		mgmt := ht.Default(KindManagement)
		got := struct{ secureBoot, asAsked, vmedia, vmediaNoop bool }{
			ht.SupportsSecureBoot(), ht.RecordsBootModeAsAsked(), SupportsVirtualMedia(name, mgmt), SupportsVirtualMedia(name, Noop),
		}
		if got != want {
			t.Errorf("%s: secure boot, boot mode as asked, virtual media (%s, noop) %+v, want %+v", name, mgmt, got, want)
		}
	}
	if !SupportsVirtualMedia("unknown", Fake) || SupportsVirtualMedia("unknown", IPMITool) {
		t.Error("virtual media of an unknown type follows its management interface")
	}

	for _, c := range []struct {
		kind Kind
		name Interface
		want StepMethod
	}{
		{KindBIOS, Fake, StepsRecorded}, {KindRAID, Fake, StepsRecorded}, {KindFirmware, Fake, StepsRecorded},
		{KindBIOS, Redfish, StepsOutOfBand}, {KindRAID, Redfish, StepsOutOfBand}, {KindFirmware, Redfish, StepsOutOfBand},
		{KindRAID, Agent, StepsInBand},
		{KindBIOS, NoBIOS, StepsNone}, {KindRAID, NoRAID, StepsNone}, {KindFirmware, NoFirmware, StepsNone},
		{KindRAID, "unknown", StepsNone}, {KindPower, Redfish, StepsNone},
	} {
		if got := StepsOf(c.kind, c.name); got != c.want {
			t.Errorf("StepsOf(%s, %s) = %v, want %v", c.kind, c.name, got, c.want)
		}
	}

	for iface, want := range map[Interface]bool{Redfish: true, Fake: false, NoBIOS: false, "unknown": false} {
		if b := BIOSOf(iface); b.CachesSettings() != want || b.AppliesAtReboot() != want {
			t.Errorf("bios %s: caches %v, applies at reboot %v, want %v", iface, b.CachesSettings(), b.AppliesAtReboot(), want)
		}
	}
	for iface, want := range map[Interface]bool{Flat: true, Noop: false, "unknown": false} {
		if got := NetworkOf(iface).RecordsVIFs(); got != want {
			t.Errorf("network %s records VIFs %v, want %v", iface, got, want)
		}
	}

	for _, c := range []struct {
		kind Kind
		name Interface
		want bool
	}{
		{KindRAID, NoRAID, true}, {KindBIOS, NoBIOS, true}, {KindRescue, NoRescue, true},
		{KindRAID, Fake, false}, {KindRAID, Agent, false}, {KindRAID, Redfish, false}, {KindRAID, "unknown", false},
	} {
		impl, _ := Implemented(c.kind, c.name)
		if impl.Refuses() != c.want {
			t.Errorf("%s %s refuses %v, want %v", c.kind, c.name, impl.Refuses(), c.want)
		}
	}

	power, _ := Implemented(KindPower, Redfish)
	for addr, bad := range map[string]bool{"10.0.0.1": false, "https://bmc/redfish": false, "bmc host": true, "bmc/x": true, "": false} {
		got := power.InfoProblem("n1", map[string]any{"redfish_address": addr})
		if want := "Invalid Redfish address " + addr + " set in driver_info/redfish_address on node n1"; (got != "") != bad || bad && got != want {
			t.Errorf("redfish address %q: %q", addr, got)
		}
	}
	if ipmi, _ := Implemented(KindPower, IPMITool); ipmi.InfoProblem("n1", map[string]any{"redfish_address": "a b"}) != "" {
		t.Error("ipmitool checks redfish_address")
	}
}
