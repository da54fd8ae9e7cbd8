package apiserver

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/console"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
)

// TestConsoleAPI: PUT and GET /v1/nodes/{node}/states/console answer as
// Ironic's NodeConsoleController: 400 UnsupportedDriverExtension for
// no-console, Ironic's argument messages for a bad body, 409 while another
// console change of the node runs (an operation holding the node does not
// stop one), 202 with the Location of the console, nothing started when the
// console already is as asked, console_enabled false with a null
// console_info until a worker has recorded the console, then the socat URL
// or a page URL with a token; console_enabled cannot be patched.
func TestConsoleAPI(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	none := e.createNode(map[string]any{"driver": "ipmi", "name": "con-none", "driver_info": map[string]any{"ipmi_address": "127.0.0.1"}})["uuid"].(string)
	socat := e.createNode(map[string]any{"driver": "ipmi", "name": "con-socat", "console_interface": "ipmitool-socat", "conductor_group": "rack1",
		"driver_info": map[string]any{"ipmi_address": "127.0.0.1", "ipmi_password": "secret"}})["uuid"].(string)
	web := e.createNode(map[string]any{"driver": "ipmi", "name": "con-web", "console_interface": "ipmitool-shellinabox",
		"driver_info": map[string]any{"ipmi_address": "127.0.0.1"}})["uuid"].(string)
	noaddr := e.createNode(map[string]any{"driver": "ipmi", "name": "con-noaddr", "console_interface": "ipmitool-socat"})["uuid"].(string)
	put := func(node string, body any) resp { return e.do("PUT", "/v1/nodes/"+node+"/states/console", "1.1", body) }
	get := func(node string) map[string]any {
		t.Helper()
		r := e.do("GET", "/v1/nodes/"+node+"/states/console", "1.1", nil)
		if r.status != http.StatusOK {
			t.Fatalf("GET console of %s: %d %s", node, r.status, r.body)
		}
		return r.json(t)
	}
	fault := func(r resp, status int, want string) {
		t.Helper()
		if r.status != status || r.faultstring(t) != want {
			t.Errorf("got %d %s, want %d %q", r.status, r.body, status, want)
		}
	}

	fault(put(none, map[string]any{"enabled": true}), 400, "Driver ipmi does not support console (disabled or not implemented).")
	if got := get(none); got["console_enabled"] != false || got["console_info"] != nil {
		t.Errorf("GET console of a no-console node: %v", got)
	}
	fault(put(socat, map[string]any{}), 400, "Missing mandatory parameter: enabled")
	fault(put(socat, map[string]any{"enabled": "maybe"}), 400, "Invalid enabled: Unrecognized value 'maybe', acceptable values are: '0', '1', 'f', 'false', 'n', 'no', 'off', 'on', 't', 'true', 'y', 'yes'")
	fault(put(socat, map[string]any{"enabled": true, "port": 1}), 400, "Unexpected arguments: port")
	if r := put(noaddr, map[string]any{"enabled": true}); r.status != 400 || !strings.Contains(r.faultstring(t), "ipmi_address") {
		t.Errorf("enable without ipmi_address: %d %s", r.status, r.body)
	}
	fault(put("no-such-node", map[string]any{"enabled": true}), 404, "Node no-such-node could not be found.")
	if len(e.eng.consoles) != 0 {
		t.Fatalf("refused requests reached the engine: %+v", e.eng.consoles)
	}

	// Disabling a disabled console starts nothing.
	if r := put(socat, map[string]any{"enabled": false}); r.status != http.StatusAccepted {
		t.Fatalf("disable a disabled console: %d %s", r.status, r.body)
	}
	// An operation that Ironic runs under the node's lock refuses it.
	e.eng.hold(socat, true)
	if r := put(socat, map[string]any{"enabled": "true"}); r.status != http.StatusConflict || !strings.Contains(r.faultstring(t), "is locked by host") {
		t.Errorf("enable on a locked node: %d %s", r.status, r.body)
	}
	e.eng.hold(socat, false)
	e.eng.mu.Lock()
	e.eng.consoleBusy = map[string]bool{socat: true}
	e.eng.mu.Unlock()
	if r := put(socat, map[string]any{"enabled": "true"}); r.status != http.StatusConflict || !strings.Contains(r.faultstring(t), "is locked by host") {
		t.Errorf("enable while another console change runs: %d %s", r.status, r.body)
	}
	e.eng.mu.Lock()
	e.eng.consoleBusy = nil
	e.eng.mu.Unlock()
	r := put(socat, map[string]any{"enabled": true})
	if r.status != http.StatusAccepted || !strings.HasSuffix(r.header.Get("Location"), "/v1/nodes/"+socat+"/states/console") {
		t.Fatalf("enable: %d %s, Location %q", r.status, r.body, r.header.Get("Location"))
	}
	if len(e.eng.consoles) != 1 || !e.eng.consoles[0].Enabled || e.eng.consoles[0].NodeUUID != socat || e.eng.consoles[0].ConductorGroup != "rack1" {
		t.Fatalf("engine asked %+v", e.eng.consoles)
	}
	// Until the worker records it, the console is not enabled.
	if got := get(socat); got["console_enabled"] != false {
		t.Errorf("console enabled before the worker recorded it: %v", got)
	}

	// The worker recorded it.
	held := map[string]any{store.KeyConsoleHolder: "w1", store.KeyConsoleAddress: "127.0.0.1:12345"}
	if err := e.st.SetConsoleEnabled(ctx, socat, true, held); err != nil {
		t.Fatal(err)
	}
	got := get(socat)
	info, _ := got["console_info"].(map[string]any)
	if got["console_enabled"] != true || info["type"] != "socat" || info["url"] != "tcp://127.0.0.1:12345" {
		t.Errorf("GET console of an enabled socat console: %v", got)
	}
	if r := e.do("PATCH", "/v1/nodes/"+socat, "1.1", []map[string]any{{"op": "replace", "path": "/console_enabled", "value": false}}); r.status != 400 {
		t.Errorf("PATCH console_enabled: %d %s", r.status, r.body)
	}
	if !e.node(socat).ConsoleEnabled {
		t.Error("a refused PATCH changed console_enabled")
	}
	r = e.do("PATCH", "/v1/nodes/con-socat", "1.78", []map[string]any{{"op": "replace", "path": "/driver", "value": "fake-hardware"}})
	if r.status != http.StatusConflict || r.faultstring(t) != "Node con-socat can not update the driver while the console is enabled. Please stop the console first." {
		t.Errorf("PATCH driver with the console enabled: %d %s", r.status, r.body)
	}

	// A web terminal: a page URL with a token that leads to the endpoint.
	if err := e.st.SetConsoleEnabled(ctx, web, true, held); err != nil {
		t.Fatal(err)
	}
	info, _ = get(web)["console_info"].(map[string]any)
	u, err := url.Parse(info["url"].(string))
	if info["type"] != "shellinabox" || err != nil || u.Path != "/console/terminal" || len(u.Query().Get("token")) < 40 {
		t.Fatalf("console_info of a web terminal: %v", info)
	}
	tokens := &console.Tokens{Store: e.st}
	target, err := tokens.Resolve(ctx, u.Query().Get("token"), console.KindSerial)
	if err != nil || target != (console.Target{NodeUUID: web, Kind: console.KindSerial, Addr: "127.0.0.1:12345"}) {
		t.Errorf("Resolve the page's token = %+v, %v", target, err)
	}
	if _, err := tokens.Resolve(ctx, u.Query().Get("token"), console.KindGraphical); !errors.Is(err, console.ErrBadToken) {
		t.Errorf("the serial token resolves for the graphical console: %v", err)
	}

	// The graphical console: the noVNC page with a graphical token.
	vnc := e.createNode(map[string]any{"driver": "redfish", "name": "con-vnc", "console_interface": "redfish-graphical",
		"driver_info": map[string]any{"redfish_address": "http://127.0.0.1:1", "console_vnc_address": "127.0.0.1:5900"}})["uuid"].(string)
	if err := e.st.SetConsoleEnabled(ctx, vnc, true, map[string]any{store.KeyConsoleHolder: "w1", store.KeyConsoleGraphicalAddress: "127.0.0.1:23456"}); err != nil {
		t.Fatal(err)
	}
	info, _ = get(vnc)["console_info"].(map[string]any)
	if u, err = url.Parse(info["url"].(string)); info["type"] != "vnc" || err != nil || u.Path != "/console/vnc" {
		t.Fatalf("console_info of a graphical console: %v", info)
	}
	target, err = tokens.Resolve(ctx, u.Query().Get("token"), console.KindGraphical)
	if err != nil || target != (console.Target{NodeUUID: vnc, Kind: console.KindGraphical, Addr: "127.0.0.1:23456"}) {
		t.Errorf("Resolve the VNC page's token = %+v, %v", target, err)
	}

	// Where Ironic holds no lock (an operation waits for its agent or an
	// operator, or has failed), a console change goes through beside the
	// workflow that holds the node; in an operation's active state it
	// does not.
	for _, st := range []provision.State{provision.DeployWait, provision.CleanWait, provision.RescueWait, provision.DeployFailed, provision.Deploying} {
		n := e.createNode(map[string]any{"driver": "ipmi", "console_interface": "ipmitool-socat",
			"driver_info": map[string]any{"ipmi_address": "127.0.0.1"}})["uuid"].(string)
		e.setState(n, st)
		e.eng.hold(n, true)
		asked := len(e.eng.consoles)
		r := put(n, map[string]any{"enabled": true})
		switch st {
		case provision.Deploying:
			if r.status != http.StatusConflict || len(e.eng.consoles) != asked {
				t.Errorf("enable while %s holds the node: %d %s", st, r.status, r.body)
			}
		default:
			if r.status != http.StatusAccepted || len(e.eng.consoles) != asked+1 {
				t.Errorf("enable in %s while its workflow holds the node: %d %s", st, r.status, r.body)
			}
		}
		e.eng.hold(n, false)
	}
}
