package apiserver

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/ironflow/ironflow/configdrive"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/workflows"
)

func TestProvisionVerbs(t *testing.T) {
	e := newEnv(t)
	uuid := e.createNode(map[string]any{"driver": "fake-hardware", "name": "pv"})["uuid"].(string)

	// Accepted: 202, no body, Location, and the transition recorded before
	// the answer (the CLI's --wait needs target_provision_state at once).
	r := e.do("PUT", "/v1/nodes/pv/states/provision", "1.78", map[string]any{"target": "manage"})
	if r.status != 202 || len(r.body) != 0 || r.header.Get("Content-Length") != "0" {
		t.Fatalf("manage: %d %q %v", r.status, r.body, r.header)
	}
	if loc := r.header.Get("Location"); loc != e.srv.URL+"/v1/nodes/"+uuid+"/states" {
		t.Errorf("Location %q", loc)
	}
	n := e.node(uuid)
	if n.ProvisionState != "verifying" || n.TargetProvisionState == nil || *n.TargetProvisionState != "manageable" {
		t.Errorf("after manage: %s -> %v", n.ProvisionState, n.TargetProvisionState)
	}
	if len(e.eng.provisions) != 1 || e.eng.provisions[0].Verb != "manage" || e.eng.provisions[0].FromState != "enroll" {
		t.Errorf("engine got %+v", e.eng.provisions)
	}
	hist := e.do("GET", "/v1/nodes/pv/history?detail=true", "1.78", nil).json(t)["history"].([]any)
	if len(hist) != 1 || hist[0].(map[string]any)["event_type"] != "provisioning" {
		t.Errorf("history %v", hist)
	}
	ev := hist[0].(map[string]any)["uuid"].(string)
	if r := e.do("GET", "/v1/nodes/pv/history/"+ev, "1.78", nil); r.status != 200 || r.json(t)["severity"] != "INFO" {
		t.Errorf("history event: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/v1/nodes/pv/history", "1.77", nil); r.status != 404 {
		t.Errorf("history at 1.77: %d", r.status)
	}

	// last_error is cleared by an accepted verb.
	e.setState(uuid, "manageable")
	msg := "boom"
	if _, err := e.st.SetProvisionState(context.Background(), uuid, nil, "manageable", nil, &msg); err != nil {
		t.Fatal(err)
	}
	if r := e.do("PUT", "/v1/nodes/pv/states/provision", "1.78", map[string]any{"target": "provide"}); r.status != 202 {
		t.Fatalf("provide: %d %s", r.status, r.body)
	}
	if n := e.node(uuid); n.LastError != nil || n.ProvisionState != "cleaning" || *n.TargetProvisionState != "available" {
		t.Errorf("after provide: %s %v %v", n.ProvisionState, n.TargetProvisionState, n.LastError)
	}

	cases := []struct {
		name   string
		state  provision.State
		ver    string
		body   map[string]any
		status int
		msg    string
	}{
		{"not allowed", "enroll", "1.78", map[string]any{"target": "active"}, 400,
			provision.NotAllowed("active", uuid, "enroll")},
		{"unknown verb", "available", "1.78", map[string]any{"target": "bogus"}, 400,
			provision.NotAllowed("bogus", uuid, "available")},
		{"undeploy alias below 1.73", "active", "1.72", map[string]any{"target": "undeploy"}, 406, "Request not acceptable."},
		{"deploy steps below 1.69", "available", "1.68", map[string]any{"target": "active", "deploy_steps": []any{}}, 406, "Request not acceptable."},
		{"clean without steps", "manageable", "1.78", map[string]any{"target": "clean"}, 400,
			`"clean_steps" is required when setting target provision state to clean`},
		{"configdrive on manage", "enroll", "1.78", map[string]any{"target": "manage", "configdrive": "abc"}, 400,
			"Adding a config drive is only supported when setting provision state to active, rebuild"},
		{"configdrive dict below 1.56", "available", "1.55", map[string]any{"target": "active", "configdrive": map[string]any{"meta_data": map[string]any{}}}, 400,
			"Providing a JSON object for configdrive is only supported starting with API version 1.56"},
		{"unknown argument", "available", "1.78", map[string]any{"target": "active", "bogus": 1}, 400, `Unknown argument: "bogus"`},
		{"no target", "available", "1.78", map[string]any{}, 400, `Missing argument: "target"`},
		{"abort without workflow", "clean wait", "1.78", map[string]any{"target": "abort"}, 400,
			provision.NotAllowed("abort", uuid, "clean wait")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e.setState(uuid, c.state)
			r := e.do("PUT", "/v1/nodes/"+uuid+"/states/provision", c.ver, c.body)
			if r.status != c.status || r.faultstring(t) != c.msg {
				t.Errorf("%d %s, want %d %s", r.status, r.faultstring(t), c.status, c.msg)
			}
		})
	}

	// Deploy with a config drive and deploy steps: the steps reach the
	// engine as sent, the config drive is stored with the node and never
	// handed to the workflow (its history would keep the secrets).
	e.setState(uuid, "available")
	cd := map[string]any{"meta_data": map[string]any{"hostname": "h1"}, "user_data": "#cloud-config"}
	r = e.do("PUT", "/v1/nodes/"+uuid+"/states/provision", "1.78", map[string]any{
		"target": "active", "configdrive": cd,
		"deploy_steps": []any{map[string]any{"interface": "deploy", "step": "write_image", "priority": 80}},
	})
	if r.status != 202 {
		t.Fatalf("deploy: %d %s", r.status, r.body)
	}
	last := e.eng.provisions[len(e.eng.provisions)-1]
	if len(last.ConfigDrive) != 0 {
		t.Errorf("configdrive handed to the workflow: %s", last.ConfigDrive)
	}
	if stored, _ := e.node(uuid).InstanceInfo["configdrive"].(string); !storedDriveHas(t, stored, "#cloud-config") {
		t.Errorf("configdrive not stored with the node: %.80q", stored)
	}
	if !strings.Contains(string(last.DeploySteps), `"write_image"`) {
		t.Errorf("deploy steps %s", last.DeploySteps)
	}
	if n := e.node(uuid); n.ProvisionState != "deploying" || *n.TargetProvisionState != "active" {
		t.Errorf("after deploy: %s %v", n.ProvisionState, *n.TargetProvisionState)
	}

	// A workflow holds the node: 409 NodeLocked, state untouched.
	e.setState(uuid, "active")
	e.eng.hold(uuid, true)
	r = e.do("PUT", "/v1/nodes/"+uuid+"/states/provision", "1.78", map[string]any{"target": "deleted"})
	if r.status != 409 || r.faultstring(t) != "Node "+uuid+" is locked by host node-"+uuid+", please retry after the current operation is completed." {
		t.Errorf("locked: %d %s", r.status, r.body)
	}
	if n := e.node(uuid); n.ProvisionState != "active" || n.TargetProvisionState != nil {
		t.Errorf("locked node changed: %s %v", n.ProvisionState, n.TargetProvisionState)
	}
	// abort goes to the running workflow as a signal; in wait call-back
	// from 1.110 (406 below it, nothing signalled).
	e.setState(uuid, "wait call-back")
	serveUpTo(t, v110DeployWaitAbort)
	if r := e.do("PUT", "/v1/nodes/"+uuid+"/states/provision", "1.109", map[string]any{"target": "abort"}); r.status != http.StatusNotAcceptable || len(e.eng.signals) != 0 {
		t.Errorf("abort in wait call-back at 1.109: %d %s, signals %+v; want 406 and none", r.status, r.body, e.eng.signals)
	}
	if r := e.do("PUT", "/v1/nodes/"+uuid+"/states/provision", "1.110", map[string]any{"target": "abort"}); r.status != 202 {
		t.Errorf("abort: %d %s", r.status, r.body)
	}
	if len(e.eng.signals) != 1 || e.eng.signals[0].name != workflows.SignalAbort {
		t.Errorf("signals %+v", e.eng.signals)
	}
}

func TestPowerBootDeviceMaintenance(t *testing.T) {
	e := newEnv(t)
	uuid := e.createNode(map[string]any{"driver": "ipmi", "name": "pw", "driver_info": map[string]any{"ipmi_address": "127.0.0.1"}})["uuid"].(string)

	r := e.do("PUT", "/v1/nodes/pw/states/power", "1.78", map[string]any{"target": "rebooting"})
	if r.status != 202 || r.header.Get("Location") != e.srv.URL+"/v1/nodes/"+uuid+"/states" {
		t.Fatalf("power: %d %s", r.status, r.body)
	}
	if n := e.node(uuid); n.TargetPowerState == nil || *n.TargetPowerState != "power on" {
		t.Errorf("target_power_state %v", n.TargetPowerState)
	}
	if len(e.eng.powers) != 1 || e.eng.powers[0].Target != "rebooting" {
		t.Errorf("engine powers %+v", e.eng.powers)
	}
	st := e.do("GET", "/v1/nodes/pw/states", "1.78", nil).json(t)
	if st["target_power_state"] != "power on" || st["provision_state"] != "enroll" {
		t.Errorf("states %v", st)
	}
	if r := e.do("PUT", "/v1/nodes/pw/states/power", "1.26", map[string]any{"target": "soft power off"}); r.status != 406 {
		t.Errorf("soft power off at 1.26: %d", r.status)
	}
	if r := e.do("PUT", "/v1/nodes/pw/states/power", "1.78", map[string]any{"target": "power sideways"}); r.status != 400 {
		t.Errorf("bad power target: %d %s", r.status, r.body)
	}
	if r := e.do("PUT", "/v1/nodes/pw/states/power", "1.78", map[string]any{"target": "power off", "timeout": -1}); r.status != 400 {
		t.Errorf("negative timeout: %d %s", r.status, r.body)
	}
	e.eng.hold(uuid, true)
	if r := e.do("PUT", "/v1/nodes/pw/states/power", "1.78", map[string]any{"target": "power off"}); r.status != 409 {
		t.Errorf("locked power: %d %s", r.status, r.body)
	}
	if n := e.node(uuid); n.TargetPowerState == nil || *n.TargetPowerState != "power on" {
		// The refused request must not leave its own target behind, but the
		// earlier one stays.
		t.Errorf("target after refused power off: %v", n.TargetPowerState)
	}
	e.eng.hold(uuid, false)

	// Boot device: set through the engine, read back from what was recorded.
	if r := e.do("GET", "/v1/nodes/pw/management/boot_device", "1.78", nil).json(t); r["boot_device"] != nil {
		t.Errorf("boot device before any set: %v", r)
	}
	if r := e.do("PUT", "/v1/nodes/pw/management/boot_device", "1.78", map[string]any{"boot_device": "pxe", "persistent": true}); r.status != 204 {
		t.Fatalf("set boot device: %d %s", r.status, r.body)
	}
	if got := e.do("GET", "/v1/nodes/pw/management/boot_device", "1.78", nil).json(t); got["boot_device"] != "pxe" || got["persistent"] != true {
		t.Errorf("boot device %v", got)
	}
	if r := e.do("PUT", "/v1/nodes/pw/management/boot_device", "1.78", map[string]any{"boot_device": "floppy"}); r.status != 400 {
		t.Errorf("floppy: %d", r.status)
	}
	if got := e.do("GET", "/v1/nodes/pw/management/boot_device/supported", "1.78", nil).json(t); len(got["supported_boot_devices"].([]any)) == 0 {
		t.Errorf("supported %v", got)
	}

	if r := e.do("PUT", "/v1/nodes/pw/maintenance", "1.78", map[string]any{"reason": "disk swap"}); r.status != 202 {
		t.Fatalf("maintenance: %d %s", r.status, r.body)
	}
	if n := e.node(uuid); !n.Maintenance || n.MaintenanceReason == nil || *n.MaintenanceReason != "disk swap" {
		t.Errorf("maintenance not recorded: %v %v", n.Maintenance, n.MaintenanceReason)
	}
	if r := e.do("DELETE", "/v1/nodes/pw/maintenance", "1.78", nil); r.status != 202 {
		t.Fatalf("unset maintenance: %d", r.status)
	}
	if n := e.node(uuid); n.Maintenance || n.MaintenanceReason != nil {
		t.Errorf("maintenance still set")
	}
}

func TestNodePatch(t *testing.T) {
	e := newEnv(t)
	uuid := e.createNode(map[string]any{"driver": "fake-hardware", "name": "pt", "extra": map[string]any{"a": 1}})["uuid"].(string)
	e.createNode(map[string]any{"driver": "fake-hardware", "name": "taken"})
	type op = map[string]any
	cases := []struct {
		name   string
		ver    string
		patch  any
		status int
		msg    string
		check  func(t *testing.T, n map[string]any)
	}{
		{"nested add", "1.78", []any{op{"op": "add", "path": "/instance_info/image_source", "value": "http://127.0.0.1/i.img"}, op{"op": "add", "path": "/instance_info/root_gb", "value": 10}}, 200, "",
			func(t *testing.T, n map[string]any) {
				ii := n["instance_info"].(map[string]any)
				if ii["image_source"] != "http://127.0.0.1/i.img" || ii["root_gb"] != float64(10) {
					t.Errorf("instance_info %v", ii)
				}
			}},
		{"replace nested", "1.78", []any{op{"op": "replace", "path": "/extra/a", "value": "b"}}, 200, "",
			func(t *testing.T, n map[string]any) {
				if n["extra"].(map[string]any)["a"] != "b" {
					t.Errorf("extra %v", n["extra"])
				}
			}},
		{"remove missing", "1.78", []any{op{"op": "remove", "path": "/extra/nope"}}, 400,
			"Couldn't apply patch '{'op': 'remove', 'path': '/extra/nope'}'. Reason: can't remove a non-existent object 'nope'", nil},
		{"internal field", "1.78", []any{op{"op": "replace", "path": "/provision_state", "value": "active"}}, 400,
			"'/provision_state' is an internal attribute and can not be updated", nil},
		{"driver_internal_info", "1.78", []any{op{"op": "add", "path": "/driver_internal_info/agent_secret_token", "value": "x"}}, 400,
			"'/driver_internal_info/agent_secret_token' is an internal attribute and can not be updated", nil},
		{"new root", "1.78", []any{op{"op": "add", "path": "/bogus", "value": 1}}, 400,
			"Adding a new attribute (/bogus) to the root of the resource is not allowed", nil},
		{"remove driver", "1.78", []any{op{"op": "remove", "path": "/driver"}}, 400,
			"'/driver' is a mandatory attribute and can not be removed", nil},
		{"no value", "1.78", []any{op{"op": "add", "path": "/extra/x"}}, 400,
			"'add' and 'replace' operations need a value", nil},
		{"bad path", "1.78", []any{op{"op": "add", "path": "extra", "value": 1}}, 400,
			"Schema error for patch: 'extra' does not match '^(/[\\\\w-]+)+$'", nil},
		{"not a list", "1.78", op{"op": "add"}, 400,
			"Schema error for patch: {'op': 'add'} is not of type 'array'", nil},
		{"type error", "1.78", []any{op{"op": "replace", "path": "/properties", "value": "x"}}, 400,
			"Schema error for patch: 'x' is not of type 'object', 'null'", nil},
		{"unknown driver", "1.78", []any{op{"op": "replace", "path": "/driver", "value": "nope"}}, 400,
			`No valid host was found. Reason: No conductor service registered which supports driver nope for conductor group "".`, nil},
		{"driver change resets interfaces", "1.78", []any{op{"op": "replace", "path": "/driver", "value": "ipmi"}}, 200, "",
			func(t *testing.T, n map[string]any) {
				if n["power_interface"] != "ipmitool" || n["boot_interface"] != "ipxe" {
					t.Errorf("interfaces after driver change %v %v", n["power_interface"], n["boot_interface"])
				}
			}},
		{"unsupported interface", "1.78", []any{op{"op": "replace", "path": "/power_interface", "value": "redfish"}}, 400,
			"Could not find the following interface in the 'ironic.hardware.interfaces.power' entrypoint: redfish. Valid interfaces are ['ipmitool'].", nil},
		{"duplicate name", "1.78", []any{op{"op": "replace", "path": "/name", "value": "taken"}}, 409,
			"A node with name taken already exists.", nil},
		{"field from a newer version", "1.64", []any{op{"op": "replace", "path": "/lessee", "value": "p"}}, 406, "Request not acceptable.", nil},
		{"remove name", "1.78", []any{op{"op": "remove", "path": "/name"}}, 200, "",
			func(t *testing.T, n map[string]any) {
				if n["name"] != nil {
					t.Errorf("name %v", n["name"])
				}
			}},
		{"maintenance string", "1.78", []any{op{"op": "replace", "path": "/maintenance", "value": "true"}}, 200, "",
			func(t *testing.T, n map[string]any) {
				if n["maintenance"] != true {
					t.Errorf("maintenance %v", n["maintenance"])
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do("PATCH", "/v1/nodes/"+uuid, c.ver, c.patch)
			if r.status != c.status {
				t.Fatalf("%d %s, want %d", r.status, r.body, c.status)
			}
			if c.msg != "" && r.faultstring(t) != c.msg {
				t.Errorf("message\n got %s\nwant %s", r.faultstring(t), c.msg)
			}
			if c.check != nil {
				c.check(t, r.json(t))
			}
		})
	}
}

func TestSecretsMasked(t *testing.T) {
	e := newEnv(t)
	uuid := e.createNode(map[string]any{"driver": "redfish", "name": "sec",
		"driver_info": map[string]any{"redfish_address": "https://127.0.0.1:8000", "redfish_password": "pw1",
			"redfish_username": "admin", "ipmi_kg_key": "k", "nested": map[string]any{"api_token": "t"}},
		"instance_info": map[string]any{"image_source": "https://user:pass@127.0.0.1/img", "configdrive": "H4sI...", "image_url": "http://127.0.0.1/tmp?sig=x", "root_gb": 10},
	})["uuid"].(string)
	if err := e.st.MergeDriverInternalInfo(context.Background(), uuid, map[string]any{"agent_secret_token": "tok", "agent_url": "http://127.0.0.1:9999"}); err != nil {
		t.Fatal(err)
	}
	check := func(where string, n map[string]any) {
		t.Helper()
		di := n["driver_info"].(map[string]any)
		ii := n["instance_info"].(map[string]any)
		dii := n["driver_internal_info"].(map[string]any)
		for k, got := range map[string]any{
			"redfish_password": di["redfish_password"], "ipmi_kg_key": di["ipmi_kg_key"],
			"nested.api_token": di["nested"].(map[string]any)["api_token"],
			"image_source":     ii["image_source"], "configdrive": ii["configdrive"], "image_url": ii["image_url"],
			"agent_secret_token": dii["agent_secret_token"],
		} {
			if got != "******" {
				t.Errorf("%s: %s shown as %v", where, k, got)
			}
		}
		if di["redfish_username"] != "admin" || ii["root_gb"] != float64(10) || dii["agent_url"] != "http://127.0.0.1:9999" {
			t.Errorf("%s: non-secrets masked: %v %v %v", where, di, ii, dii)
		}
	}
	check("show", e.do("GET", "/v1/nodes/sec", "1.78", nil).json(t))
	check("detail", e.do("GET", "/v1/nodes/detail", "1.78", nil).json(t)["nodes"].([]any)[0].(map[string]any))
	check("patch", e.do("PATCH", "/v1/nodes/sec", "1.78", []any{map[string]any{"op": "add", "path": "/extra/x", "value": 1}}).json(t))
	// Masking is a view: the stored values are intact after a patch.
	n := e.node(uuid)
	if n.DriverInfo["redfish_password"] != "pw1" || n.InstanceInfo["configdrive"] != "H4sI..." || n.DriverInternalInfo["agent_secret_token"] != "tok" {
		t.Errorf("stored secrets changed: %v %v %v", n.DriverInfo, n.InstanceInfo, n.DriverInternalInfo)
	}
	if got := maskQuery("addresses=a&agent_token=abc&x=1"); got != "addresses=a&agent_token=******&x=1" {
		t.Errorf("maskQuery %s", got)
	}
}

func TestPorts(t *testing.T) {
	e := newEnv(t)
	uuid := e.createNode(map[string]any{"driver": "fake-hardware", "name": "pn"})["uuid"].(string)
	r := e.do("POST", "/v1/ports", "1.78", map[string]any{"address": "52:54:00:AB:CD:EF", "node_uuid": uuid, "extra": map[string]any{"k": "v"}})
	if r.status != 201 {
		t.Fatalf("create port: %d %s", r.status, r.body)
	}
	p := r.json(t)
	pid := p["uuid"].(string)
	if p["address"] != "52:54:00:ab:cd:ef" || p["pxe_enabled"] != true || r.header.Get("Location") != e.srv.URL+"/v1/ports/"+pid {
		t.Errorf("port %v %v", p, r.header.Get("Location"))
	}
	if len(p) != 13 {
		t.Errorf("port at 1.78 has %d keys: %v", len(p), sortedKeys(p))
	}
	cases := []struct {
		body   map[string]any
		status int
		msg    string
	}{
		{map[string]any{"address": "52:54:00:ab:cd:ef", "node_uuid": uuid}, 409, "A port with MAC address 52:54:00:ab:cd:ef already exists."},
		{map[string]any{"address": "not-a-mac", "node_uuid": uuid}, 400, "Expected a MAC address but received not-a-mac."},
		{map[string]any{"address": "52:54:00:ab:cd:00", "node_uuid": "00000000-0000-0000-0000-000000000000"}, 404, "Node 00000000-0000-0000-0000-000000000000 could not be found."},
		{map[string]any{"address": "52:54:00:ab:cd:00"}, 400, "Schema error for port: 'node_uuid' is a required property"},
		{map[string]any{"address": "52:54:00:ab:cd:00", "node_uuid": uuid, "color": "red"}, 400, "Schema error for port: Additional properties are not allowed ('color' was unexpected)"},
	}
	for _, c := range cases {
		r := e.do("POST", "/v1/ports", "1.78", c.body)
		if r.status != c.status || r.faultstring(t) != c.msg {
			t.Errorf("create %v: %d %s", c.body, r.status, r.body)
		}
	}
	for _, path := range []string{"/v1/ports/?node=pn", "/v1/ports?node_uuid=" + uuid, "/v1/nodes/pn/ports", "/v1/ports?address=52:54:00:AB:CD:EF"} {
		m := e.do("GET", path, "1.78", nil).json(t)
		list := m["ports"].([]any)
		if len(list) != 1 || strings.Join(sortedKeys(list[0].(map[string]any)), " ") != "address links uuid" {
			t.Errorf("GET %s: %v", path, m)
		}
	}
	if d := e.do("GET", "/v1/ports/detail", "1.78", nil).json(t)["ports"].([]any); len(d[0].(map[string]any)) != 13 {
		t.Errorf("port detail %v", d)
	}
	r = e.do("PATCH", "/v1/ports/"+pid, "1.78", []any{
		map[string]any{"op": "replace", "path": "/address", "value": "52:54:00:00:00:01"},
		map[string]any{"op": "add", "path": "/extra/rack", "value": "r1"},
		map[string]any{"op": "replace", "path": "/pxe_enabled", "value": false},
	})
	if r.status != 200 {
		t.Fatalf("patch port: %d %s", r.status, r.body)
	}
	if p := r.json(t); p["address"] != "52:54:00:00:00:01" || p["pxe_enabled"] != false || p["extra"].(map[string]any)["rack"] != "r1" {
		t.Errorf("patched port %v", p)
	}
	if r := e.do("PATCH", "/v1/ports/"+pid, "1.78", []any{map[string]any{"op": "remove", "path": "/address"}}); r.status != 400 {
		t.Errorf("remove address: %d", r.status)
	}
	if r := e.do("PATCH", "/v1/ports/"+pid, "1.78", []any{map[string]any{"op": "replace", "path": "/internal_info", "value": map[string]any{}}}); r.status != 400 {
		t.Errorf("patch internal_info: %d", r.status)
	}
	if r := e.do("DELETE", "/v1/ports/"+pid, "1.78", nil); r.status != 204 {
		t.Errorf("delete port: %d", r.status)
	}
	if r := e.do("GET", "/v1/ports/"+pid, "1.78", nil); r.status != 404 || r.faultstring(t) != "Port "+pid+" could not be found." {
		t.Errorf("port after delete: %d %s", r.status, r.body)
	}
}

func TestDriversAndConductors(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.AllowedDrivers = []string{"ipmi", "redfish"} })
	m := e.do("GET", "/v1/drivers", "1.78", nil).json(t)
	if d := m["drivers"].([]any); len(d) != 2 || d[0].(map[string]any)["name"] != "ipmi" {
		t.Errorf("drivers %v", m)
	}
	show := e.do("GET", "/v1/drivers/redfish", "1.78", nil).json(t)
	if show["default_boot_interface"] != "redfish-virtual-media" || show["type"] != "dynamic" {
		t.Errorf("driver show %v", show)
	}
	if r := e.do("GET", "/v1/drivers/fake-hardware", "1.78", nil); r.status != 404 {
		t.Errorf("disallowed driver shown: %d", r.status)
	}
	if r := e.do("POST", "/v1/nodes", "1.78", map[string]any{"driver": "fake-hardware"}); r.status != 400 {
		t.Errorf("node with disallowed driver: %d", r.status)
	}
	if m := e.do("GET", "/v1/conductors", "1.78", nil).json(t); len(m["conductors"].([]any)) != 0 {
		t.Errorf("conductors %v", m)
	}
}

func TestHTTPBasicAuth(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("opensesame"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	// htpasswd -B writes $2y$ hashes.
	file := filepath.Join(t.TempDir(), "htpasswd")
	line := "admin:$2y$" + strings.TrimPrefix(string(hash), "$2a$") + "\n"
	if err := os.WriteFile(file, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(c *Config) { c.AuthStrategy = AuthHTTPBasic; c.HtpasswdFile = file })
	get := func(path, user, pass string) resp {
		req, _ := http.NewRequest("GET", e.srv.URL+path, nil)
		req.Header.Set(headerVersion, "1.78")
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var body []byte
		body, _ = readAll(res)
		return resp{status: res.StatusCode, header: res.Header, body: body}
	}
	r := get("/v1/nodes", "", "")
	if r.status != 401 || r.header.Get("WWW-Authenticate") != `Basic realm="Baremetal API"` || r.faultstring(t) != "Authorization required" {
		t.Errorf("no credentials: %d %v %s", r.status, r.header, r.body)
	}
	if r := get("/v1/nodes", "admin", "wrong"); r.status != 401 {
		t.Errorf("wrong password: %d", r.status)
	}
	if r := get("/v1/nodes", "nobody", "opensesame"); r.status != 401 {
		t.Errorf("unknown user: %d", r.status)
	}
	if r := get("/v1/nodes", "admin", "opensesame"); r.status != 200 {
		t.Errorf("right password: %d %s", r.status, r.body)
	}
	for _, public := range []string{"/", "/v1", "/v1/lookup?addresses=52:54:00:00:00:99"} {
		if r := get(public, "", ""); r.status == 401 {
			t.Errorf("%s needs auth", public)
		}
	}
	if _, err := New(Config{AuthStrategy: AuthHTTPBasic, HtpasswdFile: filepath.Join(t.TempDir(), "missing")}, e.st, e.eng, quietLogger()); err == nil {
		t.Errorf("New with a missing htpasswd file succeeded")
	}
}

func readAll(res *http.Response) ([]byte, error) {
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := res.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return []byte(b.String()), nil
		}
	}
}

func TestLookupAndHeartbeat(t *testing.T) {
	e := newEnv(t)
	uuid := e.createNode(map[string]any{"driver": "fake-hardware", "name": "rd"})["uuid"].(string)
	if r := e.do("POST", "/v1/ports", "1.78", map[string]any{"address": "52:54:01:00:3a:94", "node_uuid": uuid}); r.status != 201 {
		t.Fatalf("port: %d", r.status)
	}
	lookup := func(ver, q string) resp { return e.do("GET", "/v1/lookup?"+q, ver, nil) }

	if r := lookup("1.78", "addresses=52:54:01:00:3a:94"); r.status != 404 || r.faultstring(t) != "Resource could not be found." {
		t.Errorf("lookup in enroll: %d %s", r.status, r.body)
	}
	e.setState(uuid, "clean wait")
	if r := lookup("", "addresses=52:54:01:00:3a:94"); r.status != 404 || r.header.Get(headerVersion) != "1.1" {
		t.Errorf("lookup at 1.1: %d", r.status)
	}
	if r := lookup("1.78", "addresses=zz,yy"); r.status != 400 {
		t.Errorf("lookup with only invalid MACs: %d", r.status)
	}
	r := lookup("1.22", "addresses=52:54:01:00:3a:94")
	if r.status != 200 {
		t.Fatalf("lookup at 1.22: %d %s", r.status, r.body)
	}
	if cfg := r.json(t)["config"].(map[string]any); cfg["agent_token"] != nil || cfg["heartbeat_timeout"] != float64(300) || cfg["agent_token_required"] != true {
		t.Errorf("config at 1.22 %v", cfg)
	}
	if _, ok := e.node(uuid).DriverInternalInfo["agent_secret_token"]; ok {
		t.Fatalf("lookup at 1.22 generated a token")
	}

	// Racing first lookups: exactly one gets the token.
	var wg sync.WaitGroup
	tokens := make(chan string, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := lookup("1.78", "addresses=52:54:01:00:3a:94,00:11:22:33:44:55")
			if r.status != 200 {
				t.Errorf("lookup: %d %s", r.status, r.body)
				return
			}
			tokens <- r.json(t)["config"].(map[string]any)["agent_token"].(string)
		}()
	}
	wg.Wait()
	close(tokens)
	token := ""
	for tok := range tokens {
		if tok == "******" {
			continue
		}
		if token != "" {
			t.Fatalf("two lookups got a token")
		}
		token = tok
	}
	if len(token) != 43 || strings.ContainsAny(token, "+/=") {
		t.Fatalf("token %q is not 43 url-safe characters", token)
	}
	if stored := e.node(uuid).DriverInternalInfo["agent_secret_token"]; stored != token {
		t.Errorf("stored token differs")
	}
	r = lookup("1.78", "node_uuid="+uuid)
	body := r.json(t)
	if body["config"].(map[string]any)["agent_token"] != "******" ||
		body["node"].(map[string]any)["driver_internal_info"].(map[string]any)["agent_secret_token"] != "******" {
		t.Errorf("later lookup %s", r.body)
	}
	if keys := strings.Join(sortedKeys(body["node"].(map[string]any)), " "); keys != "driver_internal_info instance_info links properties uuid" {
		t.Errorf("lookup node keys %s", keys)
	}

	e.eng.hold(uuid, true)
	hb := func(ver string, b map[string]any) resp { return e.do("POST", "/v1/heartbeat/"+uuid, ver, b) }
	good := map[string]any{"callback_url": "http://127.0.0.1:9999", "agent_token": token, "agent_version": "9.4.0"}
	with := func(kv ...any) map[string]any {
		m := map[string]any{}
		for k, v := range good {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(m, kv[i].(string))
			} else {
				m[kv[i].(string)] = kv[i+1]
			}
		}
		return m
	}
	errCases := []struct {
		name string
		ver  string
		body map[string]any
		msg  string
	}{
		{"no token", "1.78", with("agent_token", nil), "Agent token is required for heartbeat processing."},
		{"wrong token", "1.78", with("agent_token", "wrong"), "Invalid or missing agent token received."},
		{"no version", "1.78", with("agent_version", nil), "Agent did not transmit a version, and a version is required. Please update the agent being used."},
		{"no callback", "1.78", with("callback_url", nil), "Missing mandatory parameter: callback_url"},
		{"empty callback without a status", "1.78", with("callback_url", ""), "Missing mandatory parameter: callback_url"},
		{"agent_version at 1.35", "1.35", good, `Field "agent_version" not recognised`},
		{"bad status", "1.78", with("agent_status", "bogus"), "Agent status is invalid. Valid states are start,end,error."},
		{"status at 1.71", "1.71", with("agent_status", "start"), `Field "agent_status" not recognised`},
		// What the workflow is signalled lands in its history: bounded.
		{"long status message", "1.78", with("agent_status", "start", "agent_status_message", strings.Repeat("m", 4097)),
			"Invalid value for agent_status_message: longer than 4096 bytes"},
		{"long callback_url", "1.78", with("callback_url", "http://h/"+strings.Repeat("p", 2048)),
			"Invalid value for callback_url: longer than 2048 bytes"},
	}
	for _, c := range errCases {
		if r := hb(c.ver, c.body); r.status != 400 || r.faultstring(t) != c.msg {
			t.Errorf("%s: %d %s", c.name, r.status, r.body)
		}
	}
	// A 3 MB status message is refused before it is decoded.
	if r := hb("1.78", with("agent_status", "start", "agent_status_message", strings.Repeat("m", 3<<20))); r.status != 413 ||
		r.faultstring(t) != fmt.Sprintf("Request body is larger than %d bytes.", maxHeartbeatBytes) {
		t.Errorf("3 MB heartbeat: %d %.200s", r.status, r.body)
	}
	if len(e.eng.signals) != 0 {
		t.Fatalf("refused heartbeats signalled: %+v", e.eng.signals)
	}
	if r := hb("1.78", with("agent_status", "start")); r.status != 202 || len(r.body) != 0 {
		t.Fatalf("heartbeat: %d %s", r.status, r.body)
	}
	dii := e.node(uuid).DriverInternalInfo
	if dii["agent_url"] != "http://127.0.0.1:9999" || dii["agent_version"] != "9.4.0" || dii["agent_last_heartbeat"] == nil {
		t.Errorf("heartbeat not recorded: %v", dii)
	}
	if len(e.eng.signals) != 1 || e.eng.signals[0].name != workflows.SignalHeartbeat ||
		e.eng.signals[0].arg.(workflows.Heartbeat).AgentStatus != "start" {
		t.Errorf("signals %+v", e.eng.signals)
	}
	// An installer (anaconda's kickstart) reports status with an empty
	// callback_url: accepted, signalled, and the agent URL is kept.
	if r := hb("1.78", with("callback_url", "", "agent_status", "end", "agent_status_message", "installed")); r.status != 202 {
		t.Fatalf("installer heartbeat: %d %s", r.status, r.body)
	}
	if dii := e.node(uuid).DriverInternalInfo; dii["agent_url"] != "http://127.0.0.1:9999" {
		t.Errorf("an empty callback_url replaced the agent URL: %v", dii)
	}
	if n := len(e.eng.signals); n != 2 || e.eng.signals[1].arg.(workflows.Heartbeat).AgentStatus != "end" {
		t.Errorf("installer heartbeat not signalled: %+v", e.eng.signals)
	}
	if r := hb("1.78", with("callback_url", "http://127.0.0.2:9999")); r.status != 400 ||
		r.faultstring(t) != `Detected change in ramdisk provided "callback_url"` {
		t.Errorf("callback change: %d %s", r.status, r.body)
	}
	if r := e.do("POST", "/v1/heartbeat/00000000-0000-0000-0000-000000000000", "1.78", good); r.status != 404 ||
		r.faultstring(t) != "Node 00000000-0000-0000-0000-000000000000 could not be found." {
		t.Errorf("unknown node: %d %s", r.status, r.body)
	}
	// No workflow waits: answered as Ironic, 202, nothing signalled.
	e.eng.hold(uuid, false)
	if r := hb("1.78", good); r.status != 202 {
		t.Errorf("heartbeat without workflow: %d %s", r.status, r.body)
	}
	if len(e.eng.signals) != 2 {
		t.Errorf("signalled without a workflow")
	}

	// continue_inspection stores the inventory and reads it back.
	e.setState(uuid, "inspect wait")
	inv := map[string]any{"interfaces": []any{map[string]any{"name": "eth0", "mac_address": "52:54:01:00:3A:94"}}, "memory": map[string]any{"physical_mb": 1024}}
	if r := e.do("POST", "/v1/continue_inspection", "1.1", map[string]any{"inventory": inv, "plugin_data": map[string]any{"x": 1}}); r.status != 400 {
		t.Errorf("continue_inspection without token: %d %s", r.status, r.body)
	}
	if r := e.do("POST", "/v1/continue_inspection", "1.1", map[string]any{"inventory": inv, "agent_token": token}); r.status != 202 || r.json(t)["uuid"] != uuid {
		t.Fatalf("continue_inspection: %d %s", r.status, r.body)
	}
	got := e.do("GET", "/v1/nodes/rd/inventory", "1.81", nil).json(t)
	if got["inventory"].(map[string]any)["memory"].(map[string]any)["physical_mb"] != float64(1024) {
		t.Errorf("inventory %v", got)
	}
	if r := e.do("GET", "/v1/nodes/rd/inventory", "1.80", nil); r.status != 404 {
		t.Errorf("inventory at 1.80: %d", r.status)
	}
}

// storedDriveHas reports whether the gzip+base64 config drive kept in
// instance_info holds want.
func storedDriveHas(t *testing.T, stored, want string) bool {
	t.Helper()
	iso, err := configdrive.Decode(stored)
	if err != nil {
		t.Logf("decode stored configdrive: %v", err)
		return false
	}
	return bytes.Contains(iso, []byte(want))
}
