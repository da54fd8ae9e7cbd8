package vbmc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/bmc"
)

// The EventService driven by ironflow's redfish driver, with no VM
// running: a subscription is created with HttpHeaders, listed and read
// without them; a test event reaches its destination with the headers and
// the Context; it is deleted; what a BMC cannot deliver to is refused with
// the Base registry's words.
func TestEventServiceSubscriptions(t *testing.T) {
	srv, err := NewServer(newTestConfig(t), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close() })
	d, err := bmc.New("redfish", map[string]any{"redfish_address": hs.URL, "redfish_username": "admin",
		"redfish_password": "password", "redfish_system_id": "vm0", "redfish_connection_retry_interval": "10ms"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	ev := d.(bmc.EventSubscriber)
	ctx := context.Background()

	got := make(chan *http.Request, 1)
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b bytes.Buffer
		_, _ = b.ReadFrom(r.Body)
		r.Body.Close()
		r.Header.Set("X-Test-Body", b.String())
		got <- r
	}))
	t.Cleanup(dest.Close)

	sub, err := ev.CreateSubscription(ctx, map[string]any{"Destination": dest.URL + "/events", "Protocol": "Redfish",
		"Context": "metal3", "EventTypes": []any{"Alert"}, "HttpHeaders": []any{map[string]any{"Authorization": "Bearer dest-secret"}}})
	if err != nil {
		t.Fatalf("CreateSubscription: %v", err)
	}
	if sub["Id"] != "1" || sub["Context"] != "metal3" || len(sub["HttpHeaders"].([]any)) != 0 {
		t.Fatalf("created %v", sub)
	}
	col, err := ev.Subscriptions(ctx)
	if err != nil || col["Members@odata.count"] != float64(1) {
		t.Fatalf("Subscriptions = %v, %v", col, err)
	}
	if one, err := ev.Subscription(ctx, "1"); err != nil || one["Destination"] != dest.URL+"/events" || strings.Contains(toJSON(one), "dest-secret") {
		t.Fatalf("Subscription(1) = %v, %v", one, err)
	}

	req, _ := http.NewRequest(http.MethodPost, hs.URL+"/redfish/v1/EventService/Actions/EventService.SubmitTestEvent", strings.NewReader(`{"Message": "hello"}`))
	req.SetBasicAuth("admin", "password")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("SubmitTestEvent: %v %v", resp, err)
	}
	r := <-got
	if r.URL.Path != "/events" || r.Header.Get("Authorization") != "Bearer dest-secret" || !strings.Contains(r.Header.Get("X-Test-Body"), `"Context":"metal3"`) {
		t.Fatalf("delivered %s %v", r.URL.Path, r.Header)
	}

	if err := ev.DeleteSubscription(ctx, "1"); err != nil {
		t.Fatalf("DeleteSubscription: %v", err)
	}
	if err := ev.DeleteSubscription(ctx, "1"); !errors.Is(err, bmc.ErrUnsupported) || !strings.Contains(err.Error(), "HTTP 404") {
		t.Fatalf("second delete: %v", err)
	}

	for _, c := range []struct {
		body map[string]any
		want string
	}{
		{map[string]any{"Destination": "events.example", "Protocol": "Redfish", "Context": ""}, "for the property Destination is not a format"},
		{map[string]any{"Destination": "https://events.example", "Protocol": "SNMPv2c", "Context": ""}, "'SNMPv2c' for the property Protocol is not in the list"},
		{map[string]any{"Destination": "https://events.example", "Protocol": "Redfish", "Context": strings.Repeat("c", 257)}, "Context is longer than 256"},
		{map[string]any{"Destination": "https://events.example", "Protocol": "Redfish", "Context": "", "EventTypes": []any{"MetricReport"}}, "'MetricReport' for the property EventTypes"},
	} {
		if _, err := ev.CreateSubscription(ctx, c.body); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("create %v: %v, want %q", c.body, err, c.want)
		}
	}
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
