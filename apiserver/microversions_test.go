package apiserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/workflows"
)

// The microversions from 1.83 on (docs/api-versions.md), each at its version
// and just below it.

// TestParentNodeAndChildren: parent_node (1.83) names an existing node by
// UUID or name and stores its UUID; lists hide children from 1.83 unless
// asked; /children lists the UUIDs; below 1.83 all of it is unknown.
func TestParentNodeAndChildren(t *testing.T) {
	e := newEnv(t)
	parent := e.createNode(map[string]any{"driver": "fake-hardware", "name": "chassis-a"})["uuid"].(string)
	other := e.createNode(map[string]any{"driver": "fake-hardware", "name": "lonely"})["uuid"].(string)

	// Create with a parent by name; shown at 1.83, hidden at 1.82.
	r := e.do("POST", "/v1/nodes", "1.83", map[string]any{"driver": "fake-hardware", "name": "blade-1", "parent_node": "chassis-a"})
	if r.status != http.StatusCreated || r.json(t)["parent_node"] != parent {
		t.Fatalf("create child: %d %s", r.status, r.body)
	}
	child := r.json(t)["uuid"].(string)
	if r := e.do("POST", "/v1/nodes", "1.82", map[string]any{"driver": "fake-hardware", "parent_node": parent}); r.status != http.StatusNotAcceptable {
		t.Errorf("parent_node at 1.82: %d %s", r.status, r.body)
	}
	if _, ok := e.do("GET", "/v1/nodes/"+child, "1.82", nil).json(t)["parent_node"]; ok {
		t.Errorf("parent_node shown at 1.82")
	}
	if r := e.do("GET", "/v1/nodes/"+child+"?fields=parent_node", "1.82", nil); r.status != http.StatusNotAcceptable {
		t.Errorf("?fields=parent_node at 1.82: %d", r.status)
	}

	// A parent that does not exist is Ironic's NodeNotFound.
	r = e.do("POST", "/v1/nodes", "1.83", map[string]any{"driver": "fake-hardware", "parent_node": "no-such-node"})
	if r.status != http.StatusNotFound || r.faultstring(t) != "Node no-such-node could not be found." {
		t.Errorf("missing parent: %d %s", r.status, r.body)
	}
	// PATCH: set by UUID, refused when missing, removed.
	patch := func(ops ...map[string]any) resp { return e.do("PATCH", "/v1/nodes/"+other, "1.83", ops) }
	if r := patch(map[string]any{"op": "add", "path": "/parent_node", "value": "00000000-0000-0000-0000-000000000001"}); r.status != http.StatusNotFound {
		t.Errorf("patch missing parent: %d %s", r.status, r.body)
	}
	if r := patch(map[string]any{"op": "add", "path": "/parent_node", "value": parent}); r.status != http.StatusOK || r.json(t)["parent_node"] != parent {
		t.Fatalf("patch parent: %d %s", r.status, r.body)
	}

	// Lists: children hidden from 1.83 on unless include_children or
	// parent_node asks for them; shown below 1.83 as before.
	list := func(q, v string) []string { return listUUIDs(t, e.do("GET", "/v1/nodes"+q, v, nil)) }
	sorted := func(s ...string) []string { sort.Strings(s); return s }
	if got := list("", "1.83"); !slices.Equal(got, []string{parent}) {
		t.Errorf("list at 1.83: %v, want only the parent", got)
	}
	if got := list("", "1.82"); len(got) != 3 {
		t.Errorf("list at 1.82: %v, want all three", got)
	}
	if got := list("?include_children=True", "1.83"); len(got) != 3 {
		t.Errorf("include_children: %v", got)
	}
	if got := list("?parent_node=chassis-a", "1.83"); !slices.Equal(got, sorted(child, other)) {
		t.Errorf("parent_node filter: %v", got)
	}
	for _, q := range []string{"?include_children=True", "?parent_node=" + parent} {
		if r := e.do("GET", "/v1/nodes"+q, "1.82", nil); r.status != http.StatusNotAcceptable {
			t.Errorf("%s at 1.82: %d", q, r.status)
		}
	}
	if r := e.do("GET", "/v1/nodes?include_children=maybe", "1.83", nil); r.status != http.StatusBadRequest {
		t.Errorf("include_children=maybe: %d", r.status)
	}

	// /children: the UUIDs; 404 below 1.83.
	r = e.do("GET", "/v1/nodes/chassis-a/children", "1.83", nil)
	if r.status != http.StatusOK {
		t.Fatalf("children: %d %s", r.status, r.body)
	}
	var kids []string
	for _, k := range r.json(t)["children"].([]any) {
		kids = append(kids, k.(string))
	}
	if !slices.Equal(sorted(kids...), sorted(child, other)) {
		t.Errorf("children %v", kids)
	}
	if r := e.do("GET", "/v1/nodes/"+child+"/children", "1.83", nil); r.status != http.StatusOK || len(r.json(t)["children"].([]any)) != 0 {
		t.Errorf("children of a leaf: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/v1/nodes/chassis-a/children", "1.82", nil); r.status != http.StatusNotFound {
		t.Errorf("children at 1.82: %d", r.status)
	}

	// Removing the parent; deleting a parent leaves its children orphaned.
	if r := patch(map[string]any{"op": "remove", "path": "/parent_node"}); r.status != http.StatusOK || r.json(t)["parent_node"] != nil {
		t.Errorf("remove parent: %d %s", r.status, r.body)
	}
	if r := e.do("DELETE", "/v1/nodes/"+parent, "1.83", nil); r.status != http.StatusNoContent {
		t.Fatalf("delete parent: %d %s", r.status, r.body)
	}
	if p := e.node(child).ParentNode; p != nil {
		t.Errorf("child keeps deleted parent %s", *p)
	}
}

// TestContinueInspectionVersions: the endpoint serves 1.84 and later, and
// requests without a version (IPA's callback); 1.2 to 1.83 get Ironic's 404.
func TestContinueInspectionVersions(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.InspectionWithoutToken = true })
	uuid := e.createNode(map[string]any{"driver": "fake-hardware", "name": "insp"})["uuid"].(string)
	e.do("POST", "/v1/ports", "1.78", map[string]any{"node_uuid": uuid, "address": "52:54:01:00:3b:01"})
	e.setState(uuid, "inspect wait")
	body := map[string]any{"inventory": map[string]any{"interfaces": []any{map[string]any{"name": "eth0", "mac_address": "52:54:01:00:3b:01"}}}}
	for _, v := range []string{"1.22", "1.78", "1.83"} {
		r := e.do("POST", "/v1/continue_inspection", v, body)
		if r.status != http.StatusNotFound || r.faultstring(t) != "API version 1.84 or newer is required" {
			t.Errorf("at %s: %d %s", v, r.status, r.body)
		}
	}
	if r := e.do("POST", "/v1/continue_inspection?node_uuid="+uuid, "", body); r.status != http.StatusNotFound {
		t.Errorf("node_uuid without a version: %d %s", r.status, r.body)
	}
	// Without a version: inspector's answer.
	if r := e.do("POST", "/v1/continue_inspection", "", body); r.status != http.StatusAccepted || r.json(t)["uuid"] != uuid {
		t.Errorf("without a version: %d %s", r.status, r.body)
	}
	// From 1.84: the lookup's answer, with the agent token issued then
	// (the node had none) and masked afterwards.
	r := e.do("POST", "/v1/continue_inspection", "1.84", body)
	if r.status != http.StatusAccepted {
		t.Fatalf("at 1.84: %d %s", r.status, r.body)
	}
	got := r.json(t)
	tok, _ := got["config"].(map[string]any)["agent_token"].(string)
	if got["node"].(map[string]any)["uuid"] != uuid || len(tok) < 32 || tok != e.node(uuid).DriverInternalInfo["agent_secret_token"] {
		t.Errorf("answer at 1.84: %s", r.body)
	}
	body["agent_token"] = tok
	r = e.do("POST", "/v1/continue_inspection?node_uuid="+uuid, "1.84", body)
	if r.status != http.StatusAccepted || r.json(t)["config"].(map[string]any)["agent_token"] != "******" {
		t.Errorf("node_uuid at 1.84: %d %s", r.status, r.body)
	}
}

// TestUnholdVerb: 406 below 1.85; from 1.85, a node outside the hold
// states gets Ironic's state error; in a hold state the paused workflow
// is sent the unhold signal (202), and a hold state no workflow holds is
// refused with the state error, the node left as it is. Abort is accepted
// in the hold states (Ironic's clean hold --abort--> clean failed).
func TestUnholdVerb(t *testing.T) {
	defer func(d time.Duration) { unholdWait = d }(unholdWait)
	unholdWait = 50 * time.Millisecond
	e := newEnv(t)
	uuid := e.createNode(map[string]any{"driver": "fake-hardware", "name": "held"})["uuid"].(string)
	e.setState(uuid, "active")
	unhold := func(v string) resp {
		return e.do("PUT", "/v1/nodes/"+uuid+"/states/provision", v, map[string]any{"target": "unhold"})
	}
	if r := unhold("1.84"); r.status != http.StatusNotAcceptable {
		t.Errorf("unhold at 1.84: %d %s", r.status, r.body)
	}
	r := unhold("1.85")
	want := `The requested action "unhold" can not be performed on node "` + uuid + `" while it is in state "active".`
	if r.status != http.StatusBadRequest || r.faultstring(t) != want {
		t.Errorf("unhold in active: %d %s", r.status, r.body)
	}
	for _, st := range []provision.State{"deploy hold", "clean hold", "service hold"} {
		e.setState(uuid, st)
		e.eng.hold(uuid, false)
		r := unhold("1.85")
		want := fmt.Sprintf(`The requested action "unhold" can not be performed on node "%s" while it is in state "%s".`, uuid, st)
		if r.status != http.StatusBadRequest || r.faultstring(t) != want {
			t.Errorf("unhold in %s without a workflow: %d %s", st, r.status, r.body)
		}
		e.eng.hold(uuid, true)
		e.eng.signals = nil
		if r := unhold("1.85"); r.status != http.StatusAccepted {
			t.Errorf("unhold in %s: %d %s", st, r.status, r.body)
		}
		if len(e.eng.signals) != 1 || e.eng.signals[0].name != workflows.SignalUnhold {
			t.Errorf("unhold in %s sent %+v", st, e.eng.signals)
		}
		e.eng.signals = nil
		r = e.do("PUT", "/v1/nodes/"+uuid+"/states/provision", "1.85", map[string]any{"target": "abort"})
		if r.status != http.StatusAccepted || len(e.eng.signals) != 1 || e.eng.signals[0].name != workflows.SignalAbort {
			t.Errorf("abort in %s: %d %s, signals %+v", st, r.status, r.body, e.eng.signals)
		}
		if got := e.node(uuid).ProvisionState; got != st {
			t.Errorf("the API moved the node from %s to %s (the workflow does)", st, got)
		}
	}
}

// TestFirmwareInterface: the node field and the driver's firmware
// interfaces appear at 1.86, with no-firmware the only one a real
// hardware type enables.
func TestFirmwareInterface(t *testing.T) {
	e := newEnv(t)
	n := e.do("POST", "/v1/nodes", "1.86", map[string]any{"driver": "fake-hardware", "name": "fw"})
	if n.status != http.StatusCreated {
		t.Fatalf("create: %d %s", n.status, n.body)
	}
	uuid := n.json(t)["uuid"].(string)
	if got := n.json(t)["firmware_interface"]; got != "fake" {
		t.Errorf("fake-hardware default firmware_interface %v, want fake", got)
	}
	if _, ok := e.do("GET", "/v1/nodes/"+uuid, "1.85", nil).json(t)["firmware_interface"]; ok {
		t.Errorf("firmware_interface shown at 1.85")
	}
	patch := func(v, value string) resp {
		return e.do("PATCH", "/v1/nodes/"+uuid, v, []map[string]any{{"op": "replace", "path": "/firmware_interface", "value": value}})
	}
	if r := patch("1.86", "no-firmware"); r.status != http.StatusOK || r.json(t)["firmware_interface"] != "no-firmware" {
		t.Errorf("patch no-firmware: %d %s", r.status, r.body)
	}
	if r := patch("1.86", "redfish"); r.status != http.StatusBadRequest || !strings.Contains(r.faultstring(t), "ironic.hardware.interfaces.firmware") {
		t.Errorf("patch redfish firmware on fake-hardware: %d %s", r.status, r.body)
	}
	if r := patch("1.85", "fake"); r.status == http.StatusOK {
		t.Errorf("patch firmware_interface at 1.85: %d %s", r.status, r.body)
	}
	d := e.do("GET", "/v1/drivers/redfish", "1.86", nil).json(t)
	// redfish's firmware interface updates through the UpdateService
	// (bmc/redfish_firmware.go); no-firmware stays the default.
	if d["default_firmware_interface"] != "no-firmware" || fmt.Sprint(d["enabled_firmware_interfaces"]) != "[no-firmware redfish]" {
		t.Errorf("redfish at 1.86: %v %v", d["default_firmware_interface"], d["enabled_firmware_interfaces"])
	}
	if _, ok := e.do("GET", "/v1/drivers/redfish", "1.85", nil).json(t)["default_firmware_interface"]; ok {
		t.Errorf("default_firmware_interface at 1.85")
	}
}

// serveUpTo lets one test negotiate versions ironflow implements ahead of
// MaxVersionMinor (1.88 to 1.91 wait for 1.87, docs/api-versions.md).
func serveUpTo(t *testing.T, minor int) {
	t.Helper()
	if minor <= servedMaxMinor {
		return
	}
	was := servedMaxMinor
	servedMaxMinor = minor
	t.Cleanup(func() { servedMaxMinor = was })
}

// TestPortName: name (1.88) is shown, set, unique, and identifies a port.
func TestPortName(t *testing.T) {
	serveUpTo(t, v88PortName)
	e := newEnv(t)
	uuid := e.createNode(map[string]any{"driver": "fake-hardware", "name": "pn"})["uuid"].(string)
	r := e.do("POST", "/v1/ports", "1.88", map[string]any{"node_uuid": uuid, "address": "52:54:01:00:3c:01", "name": "eth-left"})
	if r.status != http.StatusCreated || r.json(t)["name"] != "eth-left" {
		t.Fatalf("create named port: %d %s", r.status, r.body)
	}
	pid := r.json(t)["uuid"].(string)
	if r := e.do("POST", "/v1/ports", "1.87", map[string]any{"node_uuid": uuid, "address": "52:54:01:00:3c:02", "name": "x"}); r.status != http.StatusNotAcceptable {
		t.Errorf("name at 1.87: %d %s", r.status, r.body)
	}
	if _, ok := e.do("GET", "/v1/ports/"+pid, "1.87", nil).json(t)["name"]; ok {
		t.Errorf("name shown at 1.87")
	}
	if r := e.do("GET", "/v1/ports/eth-left", "1.88", nil); r.status != http.StatusOK || r.json(t)["uuid"] != pid {
		t.Errorf("get by name: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/v1/ports/eth-left", "1.87", nil); r.status != http.StatusBadRequest {
		t.Errorf("get by name at 1.87: %d %s", r.status, r.body)
	}
	r = e.do("POST", "/v1/ports", "1.88", map[string]any{"node_uuid": uuid, "address": "52:54:01:00:3c:03", "name": "eth-left"})
	if r.status != http.StatusConflict || r.faultstring(t) != "A port with name eth-left already exists." {
		t.Errorf("duplicate name: %d %s", r.status, r.body)
	}
	if r := e.do("POST", "/v1/ports", "1.88", map[string]any{"node_uuid": uuid, "address": "52:54:01:00:3c:04", "name": "bad name"}); r.status != http.StatusBadRequest {
		t.Errorf("invalid name: %d %s", r.status, r.body)
	}
}

// TestLocalLinkConnectionKeysByVersion: network_type needs 1.64 and the
// OVN VTEP switch keys 1.90.
func TestLocalLinkConnectionKeysByVersion(t *testing.T) {
	serveUpTo(t, v90OVNVtep)
	e := newEnv(t)
	uuid := e.createNode(map[string]any{"driver": "fake-hardware", "name": "llc"})["uuid"].(string)
	vtep := map[string]any{"port_id": "p1", "vtep-logical-switch": "ls1", "vtep-physical-switch": "ps1"}
	create := func(v, mac string, llc map[string]any) resp {
		return e.do("POST", "/v1/ports", v, map[string]any{"node_uuid": uuid, "address": mac, "local_link_connection": llc})
	}
	if r := create("1.89", "52:54:01:00:3d:01", vtep); r.status != http.StatusNotAcceptable {
		t.Errorf("vtep keys at 1.89: %d %s", r.status, r.body)
	}
	if r := create("1.90", "52:54:01:00:3d:04", vtep); r.status != http.StatusCreated {
		t.Errorf("vtep keys at 1.90: %d %s", r.status, r.body)
	}
	if r := create("1.63", "52:54:01:00:3d:02", map[string]any{"network_type": "unmanaged"}); r.status != http.StatusNotAcceptable {
		t.Errorf("network_type at 1.63: %d %s", r.status, r.body)
	}
	r := create("1.64", "52:54:01:00:3d:03", map[string]any{"network_type": "unmanaged"})
	if r.status != http.StatusCreated {
		t.Fatalf("network_type at 1.64: %d %s", r.status, r.body)
	}
	// A PATCH of another field by an older client is not refused for a
	// key a newer one stored.
	pid := r.json(t)["uuid"].(string)
	if r := e.do("PATCH", "/v1/ports/"+pid, "1.50", []map[string]any{{"op": "add", "path": "/extra/a", "value": "b"}}); r.status != http.StatusOK {
		t.Errorf("older patch of extra: %d %s", r.status, r.body)
	}
	if r := e.do("PATCH", "/v1/ports/"+pid, "1.86", []map[string]any{{"op": "add", "path": "/local_link_connection/vtep-logical-switch", "value": "x"}}); r.status != http.StatusNotAcceptable {
		t.Errorf("patch vtep key at 1.86: %d %s", r.status, r.body)
	}
}

// TestDotJSONSuffix: below 1.91, GET /v1/nodes/<name>.json finds <name>;
// from 1.91 the suffix is part of the name.
func TestDotJSONSuffix(t *testing.T) {
	serveUpTo(t, v91DotJSON)
	e := newEnv(t)
	uuid := e.createNode(map[string]any{"driver": "fake-hardware", "name": "suffixed"})["uuid"].(string)
	if r := e.do("GET", "/v1/nodes/suffixed.json", "1.78", nil); r.status != http.StatusOK || r.json(t)["uuid"] != uuid {
		t.Errorf("suffixed.json at 1.78: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/v1/nodes/"+uuid+".json", "1.78", nil); r.status != http.StatusOK {
		t.Errorf("<uuid>.json at 1.78: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/v1/nodes/suffixed.json", "1.91", nil); r.status != http.StatusNotFound {
		t.Errorf("suffixed.json at 1.91: %d %s", r.status, r.body)
	}
	// A node whose name ends in .json is found as named.
	named := e.createNode(map[string]any{"driver": "fake-hardware", "name": "odd.json"})["uuid"].(string)
	if r := e.do("GET", "/v1/nodes/odd.json", "1.78", nil); r.status != http.StatusOK || r.json(t)["uuid"] != named {
		t.Errorf("odd.json: %d %s", r.status, r.body)
	}
}

// TestVersionsAboveTheMaximumAreRefused: the version after the last one
// ironflow completes is 406.
func TestVersionsAboveTheMaximumAreRefused(t *testing.T) {
	e := newEnv(t)
	next := "1." + strconv.Itoa(MaxVersionMinor+1)
	if r := e.do("GET", "/v1/nodes", next, nil); r.status != http.StatusNotAcceptable {
		t.Errorf("%s: %d", next, r.status)
	}
}

// TestVirtualMediaAttachDetach: POST/DELETE /v1/nodes/{node}/vmedia (1.89)
// with Ironic's schema, the driver check (ipmi has no virtual media), the
// node lock and the BMC's failure; 404 below 1.89.
func TestVirtualMediaAttachDetach(t *testing.T) {
	serveUpTo(t, v89AttachDetachVmedia)
	e := newEnv(t)
	uuid := e.createNode(map[string]any{"driver": "fake-hardware", "name": "vm"})["uuid"].(string)
	ipmi := e.createNode(map[string]any{"driver": "ipmi", "name": "vm-ipmi"})["uuid"].(string)
	good := map[string]any{"device_type": "cdrom", "image_url": "http://images.example/boot.iso", "image_download_source": "http"}
	attach := func(node, v string, body any) resp { return e.do("POST", "/v1/nodes/"+node+"/vmedia", v, body) }

	if r := attach(uuid, "1.88", good); r.status != http.StatusNotFound {
		t.Errorf("attach at 1.88: %d %s", r.status, r.body)
	}
	if r := e.do("DELETE", "/v1/nodes/"+uuid+"/vmedia", "1.88", nil); r.status != http.StatusNotFound {
		t.Errorf("detach at 1.88: %d %s", r.status, r.body)
	}
	if r := attach(uuid, "1.89", good); r.status != http.StatusNoContent {
		t.Fatalf("attach: %d %s", r.status, r.body)
	}
	if len(e.eng.vmedia) != 1 || !e.eng.vmedia[0].Attach || e.eng.vmedia[0].ImageURL != "http://images.example/boot.iso" || e.eng.vmedia[0].NodeUUID != uuid {
		t.Errorf("engine asked %+v", e.eng.vmedia)
	}
	for _, c := range []struct {
		body map[string]any
		want string
	}{
		{map[string]any{"image_url": "http://x/y.iso"}, "Schema error for vmedia: 'device_type' is a required property"},
		{map[string]any{"device_type": "cdrom"}, "Schema error for vmedia: 'image_url' is a required property"},
		{map[string]any{"device_type": "usb", "image_url": "http://x/y.iso"}, "Schema error for vmedia: 'usb' is not one of ['disk', 'cdrom', 'floppy']"},
		{map[string]any{"device_type": "cdrom", "image_url": "http://x/y.iso", "image_download_source": "ftp"}, "Schema error for vmedia: 'ftp' is not one of ['http', 'local', 'swift']"},
		{map[string]any{"device_type": "cdrom", "image_url": "http://x/y.iso", "bogus": 1}, "Schema error for vmedia: Additional properties are not allowed ('bogus' was unexpected)"},
	} {
		if r := attach(uuid, "1.89", c.body); r.status != http.StatusBadRequest || r.faultstring(t) != c.want {
			t.Errorf("%v: %d %s", c.body, r.status, r.body)
		}
	}
	// What ironflow does not do yet is refused before the BMC is asked.
	for _, body := range []map[string]any{
		{"device_type": "floppy", "image_url": "http://x/y.img"},
		{"device_type": "cdrom", "image_url": "http://x/y.iso", "image_download_source": "swift"},
		{"device_type": "cdrom", "image_url": "file:///etc/passwd"},
	} {
		if r := attach(uuid, "1.89", body); r.status != http.StatusBadRequest {
			t.Errorf("%v: %d %s", body, r.status, r.body)
		}
	}
	if len(e.eng.vmedia) != 1 {
		t.Errorf("refused requests reached the engine: %+v", e.eng.vmedia)
	}

	// IPMI has no virtual media: Ironic's UnsupportedDriverExtension.
	if r := attach(ipmi, "1.89", good); r.status != http.StatusBadRequest || r.faultstring(t) != "Driver ipmi does not support attach_virtual_media (disabled or not implemented)." {
		t.Errorf("ipmi attach: %d %s", r.status, r.body)
	}
	if r := e.do("DELETE", "/v1/nodes/"+ipmi+"/vmedia", "1.89", nil); r.status != http.StatusBadRequest || r.faultstring(t) != "Driver ipmi does not support detach_virtual_media (disabled or not implemented)." {
		t.Errorf("ipmi detach: %d %s", r.status, r.body)
	}

	// Detach: all devices, or the listed ones; a bad type is 400.
	if r := e.do("DELETE", "/v1/nodes/"+uuid+"/vmedia", "1.89", nil); r.status != http.StatusNoContent {
		t.Fatalf("detach: %d %s", r.status, r.body)
	}
	if len(e.eng.vmedia) != 2 || e.eng.vmedia[1].Attach {
		t.Errorf("detach asked %+v", e.eng.vmedia)
	}
	if r := e.do("DELETE", "/v1/nodes/"+uuid+"/vmedia?device_types=floppy", "1.89", nil); r.status != http.StatusNoContent || len(e.eng.vmedia) != 2 {
		t.Errorf("detach floppy only: %d %s, engine %d calls", r.status, r.body, len(e.eng.vmedia))
	}
	if r := e.do("DELETE", "/v1/nodes/"+uuid+"/vmedia?device_types=cdrom,tape", "1.89", nil); r.status != http.StatusBadRequest {
		t.Errorf("detach tape: %d %s", r.status, r.body)
	}

	// A node another operation holds is 409; a BMC failure is reported.
	e.eng.hold(uuid, true)
	if r := attach(uuid, "1.89", good); r.status != http.StatusConflict {
		t.Errorf("attach on a locked node: %d %s", r.status, r.body)
	}
	e.eng.hold(uuid, false)
	e.eng.vmediaErr = fmt.Errorf("%w: %w", ErrHardware, errors.New("the BMC has no virtual CD"))
	r := attach(uuid, "1.89", good)
	if r.status != http.StatusInternalServerError || !strings.Contains(r.faultstring(t), "the BMC has no virtual CD") {
		t.Errorf("BMC failure: %d %s", r.status, r.body)
	}
}

// TestVirtualMediaGet: GET /v1/nodes/{node}/vmedia (1.93) is 404 below
// 1.93, lists the devices as the BMC reads them (what the last attach put
// in, nothing after a detach), refuses a driver without virtual media
// (ipmi) and reports the BMC's failure; it needs no node lock.
func TestVirtualMediaGet(t *testing.T) {
	e := newEnv(t)
	uuid := e.createNode(map[string]any{"driver": "fake-hardware", "name": "vm-get"})["uuid"].(string)
	ipmi := e.createNode(map[string]any{"driver": "ipmi", "name": "vm-get-ipmi"})["uuid"].(string)
	get := func(node, v string) resp { return e.do("GET", "/v1/nodes/"+node+"/vmedia", v, nil) }
	if r := get(uuid, "1.92"); r.status != http.StatusNotFound {
		t.Errorf("get at 1.92: %d %s", r.status, r.body)
	}
	list := func() []any {
		t.Helper()
		r := get(uuid, "1.93")
		var out []any
		if r.status != http.StatusOK || json.Unmarshal(r.body, &out) != nil || len(out) != 1 {
			t.Fatalf("get at 1.93: %d %s", r.status, r.body)
		}
		return out
	}
	if d := list()[0].(map[string]any); d["inserted"] != false || d["image"] != "" {
		t.Errorf("before any attach: %v", d)
	}
	good := map[string]any{"device_type": "cdrom", "image_url": "http://images.example/get.iso"}
	if r := e.do("POST", "/v1/nodes/"+uuid+"/vmedia", "1.93", good); r.status != http.StatusNoContent {
		t.Fatalf("attach: %d %s", r.status, r.body)
	}
	e.eng.hold(uuid, true) // an operation runs: the read does not wait for it
	d := list()[0].(map[string]any)
	if d["inserted"] != true || d["image"] != "http://images.example/get.iso" || fmt.Sprint(d["media_types"]) != "[CD DVD]" {
		t.Errorf("after attach: %v", d)
	}
	e.eng.hold(uuid, false)
	if r := e.do("DELETE", "/v1/nodes/"+uuid+"/vmedia", "1.93", nil); r.status != http.StatusNoContent {
		t.Fatalf("detach: %d %s", r.status, r.body)
	}
	if d := list()[0].(map[string]any); d["inserted"] != false {
		t.Errorf("after detach: %v", d)
	}
	if r := get(ipmi, "1.93"); r.status != http.StatusBadRequest || r.faultstring(t) != "Driver ipmi does not support get_virtual_media (disabled or not implemented)." {
		t.Errorf("ipmi: %d %s", r.status, r.body)
	}
	e.eng.vmediaErr = fmt.Errorf("%w: %w", ErrHardware, errors.New("BMC unreachable"))
	if r := get(uuid, "1.93"); r.status != http.StatusInternalServerError || !strings.Contains(r.faultstring(t), "Failed to get virtual media on node "+uuid+": BMC unreachable") {
		t.Errorf("BMC failure: %d %s", r.status, r.body)
	}
}

// TestNodeShapeAt186: 1.83 adds parent_node and 1.86 firmware_interface to
// the 63 keys of 1.82.
func TestNodeShapeAt186(t *testing.T) {
	e := newEnv(t)
	e.createNode(map[string]any{"driver": "fake-hardware", "name": "shape86"})
	at := func(v string) map[string]any { return e.do("GET", "/v1/nodes/shape86", v, nil).json(t) }
	for v, want := range map[string]int{"1.82": 63, "1.83": 64, "1.85": 64, "1.86": 65} {
		if got := len(at(v)); got != want {
			t.Errorf("%d keys at %s, want %d", got, v, want)
		}
	}
	n := at("1.86")
	if _, ok := n["parent_node"]; !ok || n["parent_node"] != nil || n["firmware_interface"] != "fake" {
		t.Errorf("at 1.86: parent_node %v, firmware_interface %v", n["parent_node"], n["firmware_interface"])
	}
}
