package apiserver

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// create_subscription's HttpHeaders never reach the workflow's input (the
// history): the request carries the name of a driver_internal_info key
// that holds them while the call runs, which no view of the node shows,
// and which is gone once the API answered. A node another operation holds
// is 409 NodeLocked, its HttpHeaders gone all the same.
func TestVendorPassthruKeepsHttpHeadersOutOfTheWorkflow(t *testing.T) {
	e := newEnv(t)
	n := e.createNode(map[string]any{"driver": "redfish", "driver_info": map[string]any{"redfish_address": "http://127.0.0.1:1"}})
	uuid := n["uuid"].(string)
	if n["vendor_interface"] != "redfish" {
		t.Fatalf("vendor_interface %v, want Ironic's default redfish", n["vendor_interface"])
	}
	headers := []any{map[string]any{"Authorization": "Bearer not-in-history"}}
	r := e.do("POST", "/v1/nodes/"+uuid+"/vendor_passthru?method=create_subscription", "1.89",
		map[string]any{"Destination": "https://events.example", "HttpHeaders": headers})
	if r.status != http.StatusOK || !strings.Contains(string(r.body), `"Id":"1"`) {
		t.Fatalf("create_subscription: %d %s", r.status, r.body)
	}
	if len(e.eng.passthru) != 1 {
		t.Fatalf("calls %v", e.eng.passthru)
	}
	call := e.eng.passthru[0]
	in, _ := json.Marshal(call.req)
	if strings.Contains(string(in), "not-in-history") || call.req.SecretKey == "" || call.req.Args["Destination"] != "https://events.example" {
		t.Fatalf("the workflow's input: %s", in)
	}
	if got, _ := json.Marshal(call.internal[call.req.SecretKey]); string(got) != `[{"Authorization":"Bearer not-in-history"}]` {
		t.Fatalf("driver_internal_info[%s] held %s while the call ran", call.req.SecretKey, got)
	}
	after := e.do("GET", "/v1/nodes/"+uuid, "1.89", nil)
	if strings.Contains(string(after.body), call.req.SecretKey) || strings.Contains(string(after.body), "not-in-history") {
		t.Fatalf("the node keeps the headers: %s", after.body)
	}

	e.eng.mu.Lock()
	e.eng.running[uuid] = true
	e.eng.mu.Unlock()
	r = e.do("POST", "/v1/nodes/"+uuid+"/vendor_passthru/create_subscription", "1.89",
		map[string]any{"Destination": "https://events.example", "HttpHeaders": headers})
	if r.status != http.StatusConflict || !strings.Contains(r.faultstring(t), "is locked by host") {
		t.Fatalf("locked node: %d %s", r.status, r.body)
	}
	if after := e.do("GET", "/v1/nodes/"+uuid, "1.89", nil); strings.Contains(string(after.body), "vendor_passthru_secret_") {
		t.Fatalf("the refused call left its headers: %s", after.body)
	}
	if len(e.eng.passthru) != 1 {
		t.Fatalf("a locked node's call ran: %v", e.eng.passthru)
	}
}

// Ironic's URI check of a subscription's Destination (rfc3986's validator:
// a scheme and a host, every part valid).
func TestValidURI(t *testing.T) {
	for s, want := range map[string]bool{
		"https://events.example/metal3": true, "http://user:pw@10.0.0.1:8080/a?b=c#d": true, "http://[fd00::1]:80/x": true,
		"events.example": false, "http://": false, "not a url": false, "http://ex ample.com": false, "/relative": false,
		"1http://x": false, "http://host:port/": false,
	} {
		if got := validURI(s); got != want {
			t.Errorf("validURI(%q) = %v, want %v", s, got, want)
		}
	}
}
