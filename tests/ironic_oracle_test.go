package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ironflow/ironflow/internal/testkit/ironic"
)

// The differential tests: the same requests, good and bad, to Debian's
// Ironic (21.4, API 1.82, the oracle: internal/testkit/ironic) and to the
// lab's ironflow; the status codes and Ironic's error texts (faultstring)
// must be equal. One Ironic process serves every case of the package; it
// starts on the first test that asks for it (tens of seconds).

var oracle struct {
	once sync.Once
	srv  *ironic.Server
	dir  string
	err  error
}

// ironicOracle is the package's Ironic, started once; the test skips,
// saying why, when python3-ironic is not installed.
func ironicOracle(t *testing.T) *ironic.Server {
	t.Helper()
	if !ironic.Installed() {
		t.Skipf("SKIPPED: the Ironic oracle is missing: %v", ironic.ErrNotInstalled)
	}
	oracle.once.Do(func() {
		if oracle.dir, oracle.err = os.MkdirTemp("", "ironflow-oracle-"); oracle.err != nil {
			return
		}
		// The process lives as long as the context Start gets; Start
		// bounds its own wait for the API.
		oracle.srv, oracle.err = ironic.Start(context.Background(), filepath.Join(oracle.dir, "ironic"), slog.New(slog.NewTextHandler(io.Discard, nil)))
	})
	if oracle.err != nil {
		t.Fatalf("start Ironic: %v", oracle.err)
	}
	return oracle.srv
}

// stopIronicOracle ends the package's Ironic, if one started (TestMain).
func stopIronicOracle() {
	if oracle.srv != nil {
		oracle.srv.Stop()
	}
	if oracle.dir != "" && os.Getenv("IRONFLOW_KEEP_TEST_DIR") == "" {
		_ = os.RemoveAll(oracle.dir)
	}
}

// oracleCase is one request sent to both. In path and body, {node} is the
// name of a node both have (fake-hardware, network_interface flat, one
// port with MAC {mac}), {node-uuid} its UUID on each side; {fresh} is the
// name of a node of the same shape made for this case alone (for a request
// that changes it).
type oracleCase struct {
	name                  string
	method, path, version string
	body                  string
	// shape, when set, is what of a successful answer's body must be
	// equal as well (the answers' links and hosts differ by nature).
	shape func(map[string]any) any
	// statusOnly: the texts are not compared, where Ironic answers with
	// pecan's own error body (a title, an empty description) rather than
	// a message of its own.
	statusOnly bool
}

// oracleTables are the differential cases, by feature.
var oracleTables = []struct {
	feature string
	cases   []oracleCase
}{
	{"events", eventCases},
	{"reset_interfaces", resetInterfacesCases},
	{"driver fields", driverFieldsCases},
	{"allocations", allocationCases},
	{"vendor passthru", passthruCases},
	{"inject_nmi", nmiCases},
	{"indicators", indicatorCases},
	{"adopt", adoptCases},
}

const oracleEvent = `{"event": "network.bind_port", "port_id": "7a1c3f1e-6a3b-4b2a-9d6c-0e5f8a1b2c3d", "mac_address": "{mac}", "status": "ACTIVE"`

// eventCases: POST /v1/events (1.54). Left out on purpose: a body that is
// not JSON, which Ironic answers with a 500 and ironflow with a 400 (a
// client's mistake is never a 500 here); several unexpected keys, whose
// order in Ironic's message is the order the client wrote them in.
var eventCases = []oracleCase{
	{name: "good", method: "POST", path: "/v1/events", version: "1.54", body: `{"events": [` + oracleEvent + `}]}`},
	{name: "good, all keys", method: "POST", path: "/v1/events", version: "1.82", body: `{"events": [` + oracleEvent +
		`, "device_id": "3b2c1d0e-6a3b-4b2a-9d6c-0e5f8a1b2c3d", "binding:host_id": "{node-uuid}", "binding:vnic_type": "baremetal"}]}`},
	{name: "nulls", method: "POST", path: "/v1/events", version: "1.54", body: `{"events": [` + oracleEvent +
		`, "device_id": null, "binding:host_id": null, "binding:vnic_type": null}]}`},
	{name: "good below 1.54", method: "POST", path: "/v1/events", version: "1.53", body: `{"events": [` + oracleEvent + `}]}`},
	{name: "bad below 1.54", method: "POST", path: "/v1/events", version: "1.53", body: `{}`},
	{name: "empty body", method: "POST", path: "/v1/events", version: "1.54"},
	{name: "not an object", method: "POST", path: "/v1/events", version: "1.54", body: `[]`},
	{name: "no events", method: "POST", path: "/v1/events", version: "1.54", body: `{}`},
	{name: "empty list", method: "POST", path: "/v1/events", version: "1.54", body: `{"events": []}`},
	{name: "events not a list", method: "POST", path: "/v1/events", version: "1.54", body: `{"events": {}}`},
	{name: "unexpected key", method: "POST", path: "/v1/events", version: "1.54", body: `{"events": [], "x": 1}`},
	{name: "event not an object", method: "POST", path: "/v1/events", version: "1.54", body: `{"events": [1]}`},
	{name: "no event name", method: "POST", path: "/v1/events", version: "1.54", body: `{"events": [{}]}`},
	{name: "unknown event", method: "POST", path: "/v1/events", version: "1.54", body: `{"events": [{"event": "network.foo"}]}`},
	{name: "event name not a string", method: "POST", path: "/v1/events", version: "1.54", body: `{"events": [{"event": 5}]}`},
	{name: "later event missing its name", method: "POST", path: "/v1/events", version: "1.54", body: `{"events": [{"event": "bad"}, {}]}`},
	{name: "no port_id", method: "POST", path: "/v1/events", version: "1.54", body: `{"events": [{"event": "network.bind_port"}]}`},
	{name: "port_id not a UUID", method: "POST", path: "/v1/events", version: "1.54",
		body: `{"events": [{"event": "network.unbind_port", "port_id": "x", "mac_address": "{mac}", "status": "DOWN"}]}`},
	{name: "bad MAC", method: "POST", path: "/v1/events", version: "1.54",
		body: `{"events": [{"event": "network.delete_port", "port_id": "7a1c3f1e-6a3b-4b2a-9d6c-0e5f8a1b2c3d", "mac_address": "52-54-00-00-00-01", "status": "DOWN"}]}`},
	{name: "device_id not a UUID", method: "POST", path: "/v1/events", version: "1.54", body: `{"events": [` + oracleEvent + `, "device_id": "abc"}]}`},
	{name: "host_id not a UUID", method: "POST", path: "/v1/events", version: "1.54", body: `{"events": [` + oracleEvent + `, "binding:host_id": "abc"}]}`},
	{name: "status not a string", method: "POST", path: "/v1/events", version: "1.54",
		body: `{"events": [{"event": "network.bind_port", "port_id": "7a1c3f1e-6a3b-4b2a-9d6c-0e5f8a1b2c3d", "mac_address": "{mac}", "status": 1}]}`},
	{name: "vnic_type not a string", method: "POST", path: "/v1/events", version: "1.54", body: `{"events": [` + oracleEvent + `, "binding:vnic_type": 5}]}`},
	{name: "unexpected key in an event", method: "POST", path: "/v1/events", version: "1.54", body: `{"events": [` + oracleEvent + `, "extra": 1}]}`},
	{name: "second event bad", method: "POST", path: "/v1/events", version: "1.54",
		body: `{"events": [` + oracleEvent + `}, {"event": "network.delete_port", "port_id": "x"}]}`},
	{name: "GET", method: "GET", path: "/v1/events", version: "1.54", statusOnly: true},
	{name: "GET below 1.54", method: "GET", path: "/v1/events", version: "1.53", statusOnly: true},
}

// allocationCases: the allocation API (1.52, 1.57) on requests both
// decide before any node is chosen; what an allocation ends with, on
// ironflow's own stack, is tests/allocation_test.go's.
var allocationCases = []oracleCase{
	{name: "create below 1.52", method: "POST", path: "/v1/allocations", version: "1.51", body: `{"resource_class": "oracle"}`},
	{name: "list below 1.52", method: "GET", path: "/v1/allocations", version: "1.51", statusOnly: true},
	{name: "no resource class", method: "POST", path: "/v1/allocations", version: "1.52", body: `{}`},
	{name: "resource class not a string", method: "POST", path: "/v1/allocations", version: "1.52", body: `{"resource_class": 5}`},
	{name: "bad trait", method: "POST", path: "/v1/allocations", version: "1.52", body: `{"resource_class": "oracle", "traits": ["not a trait"]}`},
	{name: "unknown candidate", method: "POST", path: "/v1/allocations", version: "1.52", body: `{"resource_class": "oracle", "candidate_nodes": ["oracle-no-such-node"]}`},
	{name: "unexpected field", method: "POST", path: "/v1/allocations", version: "1.52", body: `{"resource_class": "oracle", "x": 1}`},
	{name: "owner below 1.60", method: "POST", path: "/v1/allocations", version: "1.59", body: `{"resource_class": "oracle", "owner": "p"}`},
	{name: "backfill below 1.58", method: "POST", path: "/v1/allocations", version: "1.57", body: `{"resource_class": "oracle", "node": "{node}"}`},
	{name: "show unknown", method: "GET", path: "/v1/allocations/oracle-no-such-allocation", version: "1.52"},
	{name: "patch below 1.57", method: "PATCH", path: "/v1/allocations/oracle-no-such-allocation", version: "1.56", body: `[]`},
	{name: "delete unknown", method: "DELETE", path: "/v1/allocations/oracle-no-such-allocation", version: "1.52"},
	{name: "node without an allocation", method: "GET", path: "/v1/nodes/{node}/allocation", version: "1.52"},
	{name: "node allocation below 1.52", method: "GET", path: "/v1/nodes/{node}/allocation", version: "1.51", statusOnly: true},
}

// passthruCases: vendor passthru on a fake-hardware node, whose vendor
// interface is fake (Ironic's FakeVendorB: second_method, async;
// third_method_sync, sync), and on the fake-hardware driver.
var passthruCases = []oracleCase{
	{name: "methods", method: "GET", path: "/v1/nodes/{node}/vendor_passthru/methods", version: "1.1",
		shape: func(b map[string]any) any { return sortedKeys(b) }},
	{name: "no method", method: "POST", path: "/v1/nodes/{node}/vendor_passthru", version: "1.1", body: `{"bar": "meow"}`},
	{name: "unknown method", method: "POST", path: "/v1/nodes/{node}/vendor_passthru?method=no_such_method", version: "1.1", body: `{}`},
	{name: "wrong HTTP method", method: "GET", path: "/v1/nodes/{node}/vendor_passthru?method=third_method_sync", version: "1.1"},
	{name: "sync method", method: "POST", path: "/v1/nodes/{node}/vendor_passthru?method=third_method_sync", version: "1.1", body: `{"bar": "meow"}`},
	{name: "sync method, false", method: "POST", path: "/v1/nodes/{node}/vendor_passthru?method=third_method_sync", version: "1.1", body: `{"bar": "woof"}`},
	{name: "async method", method: "POST", path: "/v1/nodes/{node}/vendor_passthru?method=second_method", version: "1.1", body: `{"bar": "kazoo"}`},
	{name: "unknown node", method: "GET", path: "/v1/nodes/oracle-no-such-node/vendor_passthru/methods", version: "1.1"},
	{name: "driver methods", method: "GET", path: "/v1/drivers/fake-hardware/vendor_passthru/methods", version: "1.1",
		shape: func(b map[string]any) any { return sortedKeys(b) }},
	{name: "driver unknown method", method: "POST", path: "/v1/drivers/fake-hardware/vendor_passthru?method=no_such_method", version: "1.1", body: `{}`},
	{name: "unknown driver", method: "GET", path: "/v1/drivers/no-such-driver/vendor_passthru/methods", version: "1.1"},
}

// nmiCases: PUT inject_nmi (1.29) on a fake-hardware node, whose fake
// management interface cannot inject one.
var nmiCases = []oracleCase{
	{name: "below 1.29", method: "PUT", path: "/v1/nodes/{node}/management/inject_nmi", version: "1.28", body: `{}`, statusOnly: true},
	{name: "fake management", method: "PUT", path: "/v1/nodes/{node}/management/inject_nmi", version: "1.29", body: `{}`},
	{name: "unexpected argument", method: "PUT", path: "/v1/nodes/{node}/management/inject_nmi", version: "1.29", body: `{"x": 1}`},
	{name: "unknown node", method: "PUT", path: "/v1/nodes/oracle-no-such-node/management/inject_nmi", version: "1.29", body: `{}`},
}

// indicatorCases: the indicators of a fake-hardware node (Ironic's
// FakeManagement: led-0 and led-1 on the system, the chassis and a disk).
var indicatorCases = []oracleCase{
	{name: "list", method: "GET", path: "/v1/nodes/{node}/management/indicators", version: "1.63",
		shape: func(b map[string]any) any { return indicatorNames(b) }},
	{name: "list below 1.63", method: "GET", path: "/v1/nodes/{node}/management/indicators", version: "1.62",
		shape: func(b map[string]any) any { return indicatorNames(b) }},
	{name: "one", method: "GET", path: "/v1/nodes/{node}/management/indicators/led-0@system", version: "1.63",
		shape: func(b map[string]any) any { return b["state"] }},
	{name: "malformed name", method: "GET", path: "/v1/nodes/{node}/management/indicators/led-0", version: "1.63"},
	{name: "unknown component", method: "GET", path: "/v1/nodes/{node}/management/indicators/led-0@nowhere", version: "1.63"},
	{name: "set without state", method: "PUT", path: "/v1/nodes/{node}/management/indicators/led-0@system", version: "1.63", body: `{}`},
	{name: "set state not a string", method: "PUT", path: "/v1/nodes/{node}/management/indicators/led-0@system", version: "1.63", body: `{"state": 5}`},
	{name: "set", method: "PUT", path: "/v1/nodes/{node}/management/indicators/led-0@system", version: "1.63", body: `{"state": "on"}`},
}

// adoptCases: the adopt verb (1.17) refused, on the package's node, which
// is in enroll: below its version, in a state it does not start from, and
// on no node. Left out: adopt with a config drive in a state adopt does not
// start from, which Ironic refuses for the state (it checks the state
// before the arguments) and ironflow for the config drive (it checks the
// body first, for every verb).
var adoptCases = []oracleCase{
	{name: "below 1.17", method: "PUT", path: "/v1/nodes/{node}/states/provision", version: "1.16", body: `{"target": "adopt"}`},
	{name: "in enroll", method: "PUT", path: "/v1/nodes/{node}/states/provision", version: "1.17", body: `{"target": "adopt"}`},
	{name: "in enroll, latest", method: "PUT", path: "/v1/nodes/{node}/states/provision", version: "1.82", body: `{"target": "adopt"}`},
	{name: "unknown node", method: "PUT", path: "/v1/nodes/oracle-no-such-node/states/provision", version: "1.17", body: `{"target": "adopt"}`},
}

// sortedKeys are a JSON object's keys, sorted.
func sortedKeys(b map[string]any) any {
	var ks []string
	for k := range b {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// indicatorNames are the names in an indicator list, sorted.
func indicatorNames(b map[string]any) any {
	var names []string
	list, _ := b["indicators"].([]any)
	for _, i := range list {
		if m, ok := i.(map[string]any); ok {
			names = append(names, fmt.Sprint(m["name"]))
		}
	}
	slices.Sort(names)
	return names
}

// interfacesOf is the part of a node a driver change sets.
func interfacesOf(n map[string]any) any {
	return []any{n["driver"], n["network_interface"], n["deploy_interface"], n["power_interface"], n["management_interface"]}
}

const toIPMI = `{"op": "replace", "path": "/driver", "value": "ipmi"}`

// resetInterfacesCases: PATCH /v1/nodes/{node}?reset_interfaces (1.45).
// Left out on purpose: a driver change without reset_interfaces (or with
// reset_interfaces=false) that leaves an interface the new driver lacks,
// which ironflow resets and Ironic refuses with a message that prints a
// Python object's address (docs/api-versions.md, 1.45).
var resetInterfacesCases = []oracleCase{
	{name: "reset", method: "PATCH", path: "/v1/nodes/{fresh}?reset_interfaces=True", version: "1.45", body: `[` + toIPMI + `]`, shape: interfacesOf},
	{name: "reset keeps what the patch sets", method: "PATCH", path: "/v1/nodes/{fresh}?reset_interfaces=true", version: "1.82",
		body: `[` + toIPMI + `, {"op": "replace", "path": "/deploy_interface", "value": "ramdisk"}]`, shape: interfacesOf},
	{name: "below 1.45", method: "PATCH", path: "/v1/nodes/{node}?reset_interfaces=true", version: "1.44", body: `[` + toIPMI + `]`},
	{name: "not a boolean below 1.45", method: "PATCH", path: "/v1/nodes/{node}?reset_interfaces=bogus", version: "1.44", body: `[` + toIPMI + `]`},
	{name: "not a boolean", method: "PATCH", path: "/v1/nodes/{node}?reset_interfaces=bogus", version: "1.45", body: `[` + toIPMI + `]`},
	{name: "empty", method: "PATCH", path: "/v1/nodes/{node}?reset_interfaces=", version: "1.45", body: `[` + toIPMI + `]`},
	{name: "twice", method: "PATCH", path: "/v1/nodes/{node}?reset_interfaces=True&reset_interfaces=False", version: "1.45", body: `[` + toIPMI + `]`},
	{name: "without a driver change", method: "PATCH", path: "/v1/nodes/{node}?reset_interfaces=true", version: "1.45",
		body: `[{"op": "add", "path": "/extra/k", "value": "v"}]`},
	{name: "removing the driver", method: "PATCH", path: "/v1/nodes/{node}?reset_interfaces=true", version: "1.45", body: `[{"op": "remove", "path": "/driver"}]`},
	{name: "unknown driver", method: "PATCH", path: "/v1/nodes/{node}?reset_interfaces=true", version: "1.45",
		body: `[{"op": "replace", "path": "/driver", "value": "nope"}]`},
}

// driverKeys is the sorted keys of a driver, or of the first driver of a
// list.
func driverKeys(b map[string]any) any {
	if list, ok := b["drivers"].([]any); ok {
		if len(list) == 0 {
			return nil
		}
		b, _ = list[0].(map[string]any)
	}
	keys := make([]string, 0, len(b))
	for k := range b {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// driverFieldsCases: ?fields= on the driver routes (1.77) and the checks
// of the driver list's query that come before it.
var driverFieldsCases = []oracleCase{
	{name: "list fields", method: "GET", path: "/v1/drivers?fields=name", version: "1.77", shape: driverKeys},
	{name: "list fields, upper case and repeated", method: "GET", path: "/v1/drivers?fields=NAME,hosts,name", version: "1.77", shape: driverKeys},
	{name: "list no fields", method: "GET", path: "/v1/drivers?fields=", version: "1.77", shape: driverKeys},
	{name: "list below 1.77", method: "GET", path: "/v1/drivers?fields=name", version: "1.76"},
	{name: "list unknown field", method: "GET", path: "/v1/drivers?fields=bogus", version: "1.77"},
	{name: "list detail field", method: "GET", path: "/v1/drivers?fields=default_boot_interface", version: "1.77"},
	{name: "list fields and detail", method: "GET", path: "/v1/drivers?fields=name&detail=true", version: "1.77"},
	{name: "list fields and detail below 1.30", method: "GET", path: "/v1/drivers?fields=name&detail=true", version: "1.20"},
	{name: "list fields and no detail", method: "GET", path: "/v1/drivers?fields=name&detail=false", version: "1.77", shape: driverKeys},
	{name: "list detail below 1.30", method: "GET", path: "/v1/drivers?detail=true", version: "1.29"},
	{name: "list detail not a boolean", method: "GET", path: "/v1/drivers?detail=maybe", version: "1.77"},
	{name: "list type below 1.30", method: "GET", path: "/v1/drivers?type=dynamic", version: "1.29"},
	{name: "list unknown type", method: "GET", path: "/v1/drivers?type=bogus", version: "1.77"},
	{name: "list classic", method: "GET", path: "/v1/drivers?type=classic", version: "1.77", shape: driverKeys},
	{name: "show fields", method: "GET", path: "/v1/drivers/ipmi?fields=name", version: "1.77", shape: driverKeys},
	{name: "show interface fields", method: "GET", path: "/v1/drivers/ipmi?fields=default_boot_interface,default_network_interface", version: "1.77",
		shape: func(b map[string]any) any {
			return []any{driverKeys(b), b["default_boot_interface"], b["default_network_interface"]}
		}},
	{name: "show below 1.77", method: "GET", path: "/v1/drivers/ipmi?fields=name", version: "1.76"},
	{name: "show unknown field", method: "GET", path: "/v1/drivers/ipmi?fields=bogus", version: "1.77"},
	{name: "show unknown driver", method: "GET", path: "/v1/drivers/nope?fields=name", version: "1.77"},
	{name: "show unknown driver below 1.77", method: "GET", path: "/v1/drivers/nope?fields=name", version: "1.76"},
}

// oracleSide is one of the two services with its fixture.
type oracleSide struct {
	name, url string
	nodeUUID  string
}

// answer is a response as the comparison sees it.
type answer struct {
	status      int
	faultstring string
	body        map[string]any
	raw         string
}

func (s oracleSide) do(t *testing.T, method, path, version, body string) answer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-OpenStack-Ironic-API-Version", version)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %s %s: %v", s.name, method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, raw: string(raw)}
	if len(bytes.TrimSpace(raw)) > 0 && json.Unmarshal(raw, &a.body) == nil {
		a.faultstring = errorText(a.body)
	}
	return a
}

// errorText is the message of an Ironic error body: its faultstring, or
// the description of pecan's own errors.
func errorText(body map[string]any) string {
	var inner struct {
		Faultstring *string `json:"faultstring"`
		Description string  `json:"description"`
	}
	s, _ := body["error_message"].(string)
	if json.Unmarshal([]byte(s), &inner) != nil {
		return s
	}
	if inner.Faultstring != nil {
		return *inner.Faultstring
	}
	return inner.Description
}

// oracleFixture makes the same node (and port) on both sides.
type oracleFixture struct {
	ironic, ironflow oracleSide
	node, mac        string
	fresh            int
}

func newOracleFixture(t *testing.T) *oracleFixture {
	srv := ironicOracle(t)
	suffix := strconv.FormatInt(time.Now().UnixNano()%1_000_000_000, 36)
	f := &oracleFixture{
		ironic:   oracleSide{name: "Ironic", url: srv.URL},
		ironflow: oracleSide{name: "ironflow", url: lab.APIURL},
		node:     "oracle-" + suffix,
		mac:      fmt.Sprintf("52:54:00:%02x:%02x:%02x", time.Now().Nanosecond()%256, time.Now().Nanosecond()/256%256, time.Now().Nanosecond()/65536%256),
	}
	for _, s := range []*oracleSide{&f.ironic, &f.ironflow} {
		s.nodeUUID = f.makeNode(t, *s, f.node)
		body := fmt.Sprintf(`{"address": %q, "node_uuid": %q}`, f.mac, s.nodeUUID)
		if a := s.do(t, "POST", "/v1/ports", "1.45", body); a.status != http.StatusCreated {
			t.Fatalf("%s: create port: %d %s", s.name, a.status, a.raw)
		}
	}
	return f
}

// makeNode creates a fake-hardware node with the flat network interface
// on one side and returns its UUID.
func (f *oracleFixture) makeNode(t *testing.T, s oracleSide, name string) string {
	t.Helper()
	body := fmt.Sprintf(`{"name": %q, "driver": "fake-hardware", "network_interface": "flat", "deploy_interface": "fake", "boot_interface": "fake"}`, name)
	a := s.do(t, "POST", "/v1/nodes", "1.45", body)
	if a.status != http.StatusCreated {
		t.Fatalf("%s: create node %s: %d %s", s.name, name, a.status, a.raw)
	}
	return a.body["uuid"].(string)
}

// run sends c to both sides and compares the answers.
func (f *oracleFixture) run(t *testing.T, c oracleCase) {
	t.Helper()
	fresh := ""
	if strings.Contains(c.path, "{fresh}") {
		f.fresh++
		fresh = fmt.Sprintf("%s-%d", f.node, f.fresh)
	}
	var got [2]answer
	for i, s := range []oracleSide{f.ironic, f.ironflow} {
		if fresh != "" {
			f.makeNode(t, s, fresh)
		}
		r := strings.NewReplacer("{node}", f.node, "{fresh}", fresh, "{node-uuid}", s.nodeUUID, "{mac}", f.mac)
		got[i] = s.do(t, c.method, r.Replace(c.path), c.version, r.Replace(c.body))
		// A message naming the node's UUID names each side's own.
		got[i].faultstring = strings.ReplaceAll(got[i].faultstring, s.nodeUUID, "{node-uuid}")
	}
	ir, fl := got[0], got[1]
	if ir.status != fl.status {
		t.Errorf("%s %s at %s: Ironic %d %s, ironflow %d %s", c.method, c.path, c.version, ir.status, ir.raw, fl.status, fl.raw)
		return
	}
	if !c.statusOnly && ir.faultstring != fl.faultstring {
		t.Errorf("%s %s at %s (%d):\n  Ironic   %q\n  ironflow %q", c.method, c.path, c.version, ir.status, ir.faultstring, fl.faultstring)
	}
	if c.shape != nil && ir.status < 300 {
		if a, b := fmt.Sprint(c.shape(ir.body)), fmt.Sprint(c.shape(fl.body)); a != b {
			t.Errorf("%s %s at %s: Ironic's answer has %s, ironflow's %s", c.method, c.path, c.version, a, b)
		}
	}
}

// Ironic and ironflow answer the features' good and bad requests alike.
func TestIronicOracleAgrees(t *testing.T) {
	f := newOracleFixture(t)
	for _, table := range oracleTables {
		t.Run(table.feature, func(t *testing.T) {
			for _, c := range table.cases {
				t.Run(c.name, func(t *testing.T) { f.run(t, c) })
			}
		})
	}
}

// oracleRouteBodies are well-formed bodies for the routes whose Ironic
// controller checks the body before the version.
var oracleRouteBodies = map[string]string{
	"POST /v1/heartbeat/{node_ident}":                                          `{"callback_url": "http://127.0.0.1:1"}`,
	"PUT /v1/nodes/{node_ident}/states/boot_mode":                              `{"target": "uefi"}`,
	"PUT /v1/nodes/{node_ident}/states/secure_boot":                            `{"target": true}`,
	"PUT /v1/nodes/{node_ident}/states/raid":                                   `{"logical_disks": []}`,
	"PUT /v1/nodes/{node_ident}/traits":                                        `{"traits": ["CUSTOM_ORACLE"]}`,
	"POST /v1/nodes/{node_ident}/vifs":                                         `{"id": "0f7f2b3a-7d1e-4c55-9f0e-5a1b2c3d4e5f"}`,
	"POST /v1/portgroups":                                                      `{"node_uuid": "{node-uuid}"}`,
	"PUT /v1/nodes/{node_ident}/management/indicators/{ind_ident}@{component}": `{"state": "ON"}`,
	"POST /v1/events":                                                          `{"events": [` + oracleEvent + `}]}`,
}

// The "below" column of apiserver/testdata/ironic-routes.tsv is Ironic's
// answer, and ironflow's: for every route Ironic 21.4 knows (up to 1.82)
// and introduced after 1.1, a well-formed request one version below its
// own gets the table's status from Ironic, and the same from ironflow
// (routes still being built elsewhere, TestIronicRouteContract's
// pendingRoutes, only on Ironic's side).
func TestIronicRouteRefusals(t *testing.T) {
	f := newOracleFixture(t)
	for _, r := range readRouteTable(t) {
		if r.since <= 1 || r.since > 82 {
			continue
		}
		key := r.method + " " + r.path
		methods := []string{r.method}
		if r.method == "*" {
			methods = []string{"GET", "POST"}
		}
		for _, m := range methods {
			path := strings.NewReplacer("{node_ident}", "{node}", "{driver_name}", "ipmi", "{ind_ident}@{component}", "led-0@chassis", "{trait}", "CUSTOM_ORACLE").Replace(r.path)
			for _, p := range []string{"{allocation_id}", "{hostname}", "{deploy_template_id}", "{bios_setting}", "{history_event_uuid}",
				"{node_vif_ident}", "{portgroup_ident}", "{volume_connector_id}", "{volume_target_id}"} {
				path = strings.ReplaceAll(path, p, "0d2b9c4e-6f25-4a77-9b3c-5ee1d1a0c0de")
			}
			c := oracleCase{method: m, path: path, version: "1." + strconv.Itoa(r.since-1), body: oracleRouteBodies[key], statusOnly: true}
			if c.body == "" && (m == "PATCH") {
				c.body = `[]`
			}
			rs := strings.NewReplacer("{node}", f.node, "{node-uuid}", f.ironic.nodeUUID, "{mac}", f.mac)
			ir := f.ironic.do(t, c.method, rs.Replace(c.path), c.version, rs.Replace(c.body))
			switch {
			case r.below == "served":
				if ir.status == http.StatusNotFound && ir.faultstring == "Resource could not be found." || ir.status == 405 || ir.status == 406 {
					t.Errorf("%s at %s: Ironic refuses it (%d %s); the table says it is served", key, c.version, ir.status, ir.raw)
				}
			case strconv.Itoa(ir.status) != r.below:
				t.Errorf("%s at %s: Ironic %d %s; the table says %s", key, c.version, ir.status, ir.raw, r.below)
			}
			if r.pending {
				continue
			}
			t.Run(key, func(t *testing.T) { f.run(t, c) })
		}
	}
}

// routeRow is a row of apiserver/testdata/ironic-routes.tsv as this
// package reads it.
type routeRow struct {
	method, path, below string
	since               int
	pending             bool
}

func readRouteTable(t *testing.T) []routeRow {
	t.Helper()
	data, err := os.ReadFile("../apiserver/testdata/ironic-routes.tsv")
	if err != nil {
		t.Fatal(err)
	}
	pending := pendingRouteKeys(t)
	var rows []routeRow
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		cols := strings.Split(sc.Text(), "\t")
		if len(cols) < 4 || strings.HasPrefix(cols[0], "#") || cols[0] == "method" {
			continue
		}
		minor, err := strconv.Atoi(strings.TrimPrefix(cols[2], "1."))
		if err != nil {
			t.Fatalf("ironic-routes.tsv: since %q", cols[2])
		}
		rows = append(rows, routeRow{method: cols[0], path: cols[1], since: minor, below: cols[3], pending: pending[cols[0]+" "+cols[1]]})
	}
	return rows
}

// pendingRouteKeys reads the keys of pendingRoutes from
// apiserver/contract_test.go, the one list of routes not served yet.
func pendingRouteKeys(t *testing.T) map[string]bool {
	t.Helper()
	src, err := os.ReadFile("../apiserver/contract_test.go")
	if err != nil {
		t.Fatal(err)
	}
	block := string(src)
	start := strings.Index(block, "var pendingRoutes = map[string]string{")
	if start < 0 {
		t.Fatal("apiserver/contract_test.go has no pendingRoutes")
	}
	block = block[start:]
	block = block[:strings.Index(block, "\n}\n")]
	keys := map[string]bool{}
	for _, line := range strings.Split(block, "\n")[1:] {
		if k, _, ok := strings.Cut(strings.TrimSpace(line), `":`); ok {
			keys[strings.TrimPrefix(k, `"`)] = true
		}
	}
	return keys
}
