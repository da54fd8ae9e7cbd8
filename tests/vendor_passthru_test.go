package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/noauth"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"github.com/ironflow/ironflow/embedded"
)

// passthru sends a vendor passthru request and returns the status and the
// raw body.
func passthru(t *testing.T, method, path string, body any) (int, string) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, lab.APIURL+path, r)
	req.Header.Set("X-OpenStack-Ironic-API-Version", "1.89")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// faultOf is the faultstring of an Ironic error body.
func faultOf(t *testing.T, body string) string {
	t.Helper()
	var outer struct {
		ErrorMessage string `json:"error_message"`
	}
	var inner struct {
		Faultstring string `json:"faultstring"`
	}
	if json.Unmarshal([]byte(body), &outer) != nil || json.Unmarshal([]byte(outer.ErrorMessage), &inner) != nil {
		t.Fatalf("not an Ironic error body: %s", body)
	}
	return inner.Faultstring
}

// TestVendorPassthruRedfishSubscriptionsOnTheVbmc: a redfish node on
// ironflow's vbmc (no VM runs) gets Ironic's redfish vendor interface by
// default; its methods are listed (API and baremetal CLI); a subscription
// is created with HttpHeaders, which no answer shows, which leave the
// node once sent, and which the BMC sends with its test event; it is
// listed (CLI), read, deleted (gophercloud, as Metal3 calls it), and a
// second delete is the BMC's 404. Every client mistake is a 400 in
// Ironic's words, never a 500; no-vendor has no methods; the redfish
// driver has no driver methods.
func TestVendorPassthruRedfishSubscriptionsOnTheVbmc(t *testing.T) {
	bmcURL := startFirmwareBMC(t, "vm-passthru", 1)
	var n node
	if code, _ := callAt(t, lab.APIURL, "1.89", "POST", "/v1/nodes", map[string]any{
		"name": "passthru-redfish", "driver": "redfish",
		"driver_info": map[string]any{"redfish_address": bmcURL, "redfish_username": "admin", "redfish_password": "password", "redfish_system_id": "vm-passthru"},
	}, &n); code != 201 {
		t.Fatalf("create node: %d", code)
	}
	base := "/v1/nodes/" + n.UUID + "/vendor_passthru"

	// The events the BMC sends land here.
	events := make(chan http.Header, 4)
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { events <- r.Header.Clone() }))
	t.Cleanup(dest.Close)

	// Method discovery, as Ironic's RedfishVendorPassthru declares it.
	var methods map[string]struct {
		HTTPMethods          []string `json:"http_methods"`
		Async                bool     `json:"async"`
		Description          string   `json:"description"`
		Attach               bool     `json:"attach"`
		RequireExclusiveLock bool     `json:"require_exclusive_lock"`
	}
	if code, _ := callAt(t, lab.APIURL, "1.89", "GET", base+"/methods", nil, &methods); code != 200 || len(methods) != 5 {
		t.Fatalf("methods: %d %v", code, methods)
	}
	if m := methods["create_subscription"]; m.HTTPMethods[0] != "POST" || m.Async || !m.RequireExclusiveLock ||
		m.Description != "Creates a subscription on a node. Required argument: a dictionary of {'Destination': 'destination_url'}" {
		t.Errorf("create_subscription %+v", m)
	}
	if m := methods["eject_vmedia"]; !m.Async || m.HTTPMethods[0] != "POST" {
		t.Errorf("eject_vmedia %+v", m)
	}
	list := mustCLI(t, "--os-baremetal-api-version", "1.89", "node", "passthru", "list", n.UUID, "-f", "json")
	for _, name := range []string{"create_subscription", "delete_subscription", "get_subscription", "get_all_subscriptions", "eject_vmedia"} {
		if !strings.Contains(list, `"`+name+`"`) {
			t.Errorf("baremetal node passthru list lacks %s:\n%s", name, list)
		}
	}

	// Create, with a credential for the destination.
	const secret = "Bearer passthru-dest-s3cret"
	code, body := passthru(t, "POST", base+"?method=create_subscription", map[string]any{
		"Destination": dest.URL + "/events", "Context": "metal3", "EventTypes": []string{"Alert"},
		"HttpHeaders": []map[string]string{{"Authorization": secret}}})
	var sub map[string]any
	if code != 200 || json.Unmarshal([]byte(body), &sub) != nil {
		t.Fatalf("create_subscription: %d %s\nworker log:\n%s", code, body, workerLog())
	}
	id, _ := sub["Id"].(string)
	if id == "" || sub["Destination"] != dest.URL+"/events" || sub["Context"] != "metal3" || sub["Protocol"] != "Redfish" || len(sub) != 5 {
		t.Fatalf("created %v", sub)
	}
	for k := range getNode(t, n.UUID).DriverInternalInfo {
		if strings.HasPrefix(k, "vendor_passthru_secret_") {
			t.Errorf("the HttpHeaders stayed in driver_internal_info as %s", k)
		}
	}
	// The BMC has the headers: its test event carries them.
	req, _ := http.NewRequest("POST", bmcURL+"/redfish/v1/EventService/Actions/EventService.SubmitTestEvent", strings.NewReader(`{"Message": "hi"}`))
	req.SetBasicAuth("admin", "password")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 204 {
		t.Fatalf("SubmitTestEvent: %v %v", resp, err)
	}
	if h := <-events; h.Get("Authorization") != secret {
		t.Fatalf("the event came with Authorization %q", h.Get("Authorization"))
	}

	// List (the CLI) and read.
	all := mustCLI(t, "--os-baremetal-api-version", "1.89", "node", "passthru", "call", "--http-method", "GET", n.UUID, "get_all_subscriptions")
	if !strings.Contains(all, "/redfish/v1/EventService/Subscriptions/"+id) || strings.Contains(all, secret) {
		t.Errorf("get_all_subscriptions:\n%s", all)
	}
	code, body = passthru(t, "GET", base+"?method=get_subscription", map[string]any{"id": id})
	if code != 200 || !strings.Contains(body, `"Context":"metal3"`) || strings.Contains(body, "passthru-dest-s3cret") || strings.Contains(body, "HttpHeaders") {
		t.Fatalf("get_subscription: %d %s", code, body)
	}

	// Client mistakes: 400 in Ironic's words (the BMC's own refusals
	// carried through).
	for _, c := range []struct {
		method, query string
		body          any
		want          string
	}{
		{"POST", "", map[string]any{}, "Missing mandatory parameter: method"},
		{"POST", "?method=no_such", map[string]any{}, "No handler for method no_such"},
		{"GET", "?method=create_subscription", nil, "The method create_subscription does not support HTTP GET"},
		{"POST", "?method=create_subscription", map[string]any{"Destination": "not a url"}, "Destination not a url is not a valid URI"},
		{"POST", "?method=create_subscription", map[string]any{}, "Destination None is not a valid URI"},
		{"POST", "?method=create_subscription", map[string]any{"Destination": "https://e.example", "Protocol": 5}, "Protocol 5 is not a string"},
		{"POST", "?method=create_subscription", map[string]any{"Destination": "https://e.example", "Context": []int{1}}, "Context [1] is not a valid string"},
		{"POST", "?method=create_subscription", map[string]any{"Destination": "https://e.example", "HttpHeaders": "x"}, "HttpHeaders x is not a list of headers"},
		{"POST", "?method=create_subscription", map[string]any{"Destination": "https://e.example", "EventTypes": []string{"Bogus"}},
			"EventTypes ['Bogus'] is not a valid value, allowed values {'StatusChange', 'ResourceUpdated', 'ResourceAdded', 'ResourceRemoved', 'Alert'}"},
		{"POST", "?method=create_subscription", map[string]any{"Destination": "https://e.example", "Protocol": "SNMPv2c"},
			"'SNMPv2c' for the property Protocol is not in the list of acceptable values"},
		{"POST", "?method=create_subscription", map[string]any{"Destination": "https://e.example", "Context": strings.Repeat("c", 300),
			"HttpHeaders": []map[string]string{{"Authorization": secret}}}, "Context is longer than 256 characters"},
		{"DELETE", "?method=delete_subscription", map[string]any{}, "id can't be None"},
		{"DELETE", "?method=delete_subscription", map[string]any{"id": "../1"}, "Invalid BMC subscription ID value: '../1'"},
		{"GET", "?method=get_subscription", map[string]any{"id": "a~b"}, "Invalid BMC ID value: 'a~b'"},
	} {
		code, body := passthru(t, c.method, base+c.query, c.body)
		if code != 400 || !strings.Contains(faultOf(t, body), c.want) || strings.Contains(body, "s3cret") {
			t.Errorf("%s %s %v: %d %s, want 400 %q", c.method, c.query, c.body, code, body, c.want)
		}
	}
	if code, body := passthru(t, "POST", base+"?method=create_subscription", map[string]any{"Destination": "https://e.example", "Protocol": "SNMPv2c"}); !strings.HasPrefix(faultOf(t, body),
		"Redfish exception occurred. Error: Failed to create subscription on node "+n.UUID+". Subscription payload: {'Destination': 'https://e.example', 'Protocol': 'SNMPv2c', 'Context': '', 'EventTypes': ['Alert']}. Error: ") {
		t.Errorf("BMC refusal: %d %s", code, body)
	}

	// The credential is in no log of the worker, whose activity sent it.
	if log := embedded.Tail(lab.WorkerLog(), 1<<24); strings.Contains(log, "passthru-dest-s3cret") {
		t.Error("the worker log shows the HttpHeaders")
	}

	// Delete, as Metal3 does through gophercloud; then the BMC's 404.
	client, err := noauth.NewBareMetalNoAuth(noauth.EndpointOpts{IronicEndpoint: lab.APIURL + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	client.Microversion = "1.89"
	ctx := context.Background()
	listed, err := nodes.GetAllSubscriptions(ctx, client, n.UUID, nodes.CallVendorPassthruOpts{Method: "get_all_subscriptions"}).Extract()
	if err != nil || len(listed.Members) != 1 {
		t.Fatalf("gophercloud GetAllSubscriptions: %+v %v", listed, err)
	}
	if err := nodes.DeleteSubscription(ctx, client, n.UUID, nodes.CallVendorPassthruOpts{Method: "delete_subscription"}, nodes.DeleteSubscriptionOpts{Id: id}).ExtractErr(); err != nil {
		t.Fatalf("gophercloud DeleteSubscription: %v", err)
	}
	code, body = passthru(t, "DELETE", base+"?method=delete_subscription", map[string]any{"id": id})
	if code != 404 || !strings.HasPrefix(faultOf(t, body), "Redfish exception occurred. Error: Redfish delete_subscription failed for subscription "+id+" on node "+n.UUID+". Error: ") {
		t.Fatalf("second delete: %d %s", code, body)
	}
	created, err := nodes.CreateSubscription(ctx, client, n.UUID, nodes.CallVendorPassthruOpts{Method: "create_subscription"},
		nodes.CreateSubscriptionOpts{Destination: dest.URL + "/bmo", HttpHeaders: []map[string]string{{"X-Token": "bmo-s3cret"}}, Context: "bmo"}).Extract()
	if err != nil || created.Destination != dest.URL+"/bmo" || created.Id == "" {
		t.Fatalf("gophercloud CreateSubscription: %+v %v", created, err)
	}

	// no-vendor: nothing to call.
	if code, _ := callAt(t, lab.APIURL, "1.89", "PATCH", "/v1/nodes/"+n.UUID, []map[string]any{{"op": "replace", "path": "/vendor_interface", "value": "no-vendor"}}, nil); code != 200 {
		t.Fatalf("PATCH vendor_interface: %d", code)
	}
	if code, body := passthru(t, "GET", base+"/methods", nil); code != 200 || strings.TrimSpace(body) != "{}" {
		t.Errorf("no-vendor methods: %d %s", code, body)
	}
	if code, body := passthru(t, "POST", base+"?method=create_subscription", map[string]any{"Destination": "https://e.example"}); code != 400 || faultOf(t, body) != "No handler for method create_subscription" {
		t.Errorf("no-vendor call: %d %s", code, body)
	}

	// Driver passthru: no driver methods.
	if code, body := passthru(t, "GET", "/v1/drivers/redfish/vendor_passthru/methods", nil); code != 200 || strings.TrimSpace(body) != "{}" {
		t.Errorf("driver methods: %d %s", code, body)
	}
	if code, body := passthru(t, "POST", "/v1/drivers/redfish/vendor_passthru?method=anything", map[string]any{}); code != 400 || faultOf(t, body) != "No handler for method anything" {
		t.Errorf("driver call: %d %s", code, body)
	}
	if code, body := passthru(t, "GET", "/v1/drivers/acme/vendor_passthru/methods", nil); code != 404 || faultOf(t, body) != "The driver 'acme' is unknown." {
		t.Errorf("unknown driver: %d %s", code, body)
	}
}

// TestVendorPassthruFakeVendor: fake-hardware's fake vendor interface
// answers as Ironic's FakeVendorB: a synchronous method returns whether
// bar is its word (200), an asynchronous one is accepted (202), and bar is
// required.
func TestVendorPassthruFakeVendor(t *testing.T) {
	var n node
	if code, _ := callAt(t, lab.APIURL, "1.89", "POST", "/v1/nodes", map[string]any{"name": "passthru-fake", "driver": "fake-hardware"}, &n); code != 201 {
		t.Fatalf("create node: %d", code)
	}
	base := "/v1/nodes/" + n.UUID + "/vendor_passthru"
	for _, c := range []struct {
		method string
		body   any
		code   int
		want   string
	}{
		{"third_method_sync", map[string]any{"bar": "meow"}, 200, "true"},
		{"third_method_sync", map[string]any{"bar": "woof"}, 200, "false"},
		{"second_method", map[string]any{"bar": "kazoo"}, 202, ""},
		{"second_method", map[string]any{}, 400, "Parameter 'bar' not passed to method 'second_method'."},
	} {
		code, body := passthru(t, "POST", base+"?method="+c.method, c.body)
		if code != c.code || (code == 400 && faultOf(t, body) != c.want) || (code != 400 && strings.TrimSpace(body) != c.want) {
			t.Errorf("%s %v: %d %q, want %d %q", c.method, c.body, code, body, c.code, c.want)
		}
	}
	// The CLI prints a method's return value as a dictionary, so it
	// calls the asynchronous method, which returns none (as with Ironic).
	if out := mustCLI(t, "--os-baremetal-api-version", "1.89", "node", "passthru", "call", n.UUID, "second_method", "--arg", "bar=kazoo"); strings.TrimSpace(out) != "" {
		t.Errorf("baremetal node passthru call: %q", out)
	}
	if _, errOut, err := baremetal(t, "--os-baremetal-api-version", "1.89", "node", "passthru", "call", n.UUID, "second_method"); err == nil ||
		!strings.Contains(errOut, "Parameter 'bar' not passed to method 'second_method'. (HTTP 400)") {
		t.Errorf("baremetal node passthru call without bar: %v %s", err, errOut)
	}
}
