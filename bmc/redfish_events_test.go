package bmc

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

// The event subscriptions of DMTF's recorded rackmount service: its event
// types, its four recorded subscriptions, one created (the BMC receives the
// payload as given, HttpHeaders included, and the driver reads back what
// the BMC made), read by id, deleted, and an unknown id refused with the
// BMC's own 404.
func TestRedfishEventSubscriptionsOnTheDMTFMockup(t *testing.T) {
	b := startBMC(t, "dmtf-public-rackmount1", nil)
	d := newTestRedfish(t, b.info(nil))
	ev, ok := d.(EventSubscriber)
	if !ok {
		t.Fatal("the redfish driver is not an EventSubscriber")
	}
	ctx := context.Background()

	types, err := ev.EventTypes(ctx)
	if err != nil || !slices.Equal(types, []string{"StatusChange", "ResourceUpdated", "ResourceAdded", "ResourceRemoved", "Alert"}) {
		t.Fatalf("EventTypes = %v, %v", types, err)
	}
	col, err := ev.Subscriptions(ctx)
	if err != nil || col["Members@odata.count"] != float64(4) || col["@odata.id"] != "/redfish/v1/EventService/Subscriptions" {
		t.Fatalf("Subscriptions = %v, %v", col, err)
	}

	headers := []any{map[string]any{"Authorization": "Bearer event-token"}}
	sub, err := ev.CreateSubscription(ctx, map[string]any{"Destination": "https://events.example/metal3", "Protocol": "Redfish",
		"Context": "", "EventTypes": []any{"Alert"}, "HttpHeaders": headers})
	if err != nil {
		t.Fatalf("CreateSubscription: %v", err)
	}
	if sub["Id"] != "5" || sub["Destination"] != "https://events.example/metal3" || sub["Context"] != "" || sub["HttpHeaders"] != nil {
		t.Fatalf("created %v", sub)
	}
	if len(b.headers) != 1 || b.headers[0].([]any)[0].(map[string]any)["Authorization"] != "Bearer event-token" {
		t.Fatalf("the BMC received HttpHeaders %v", b.headers)
	}
	got, err := ev.Subscription(ctx, "5")
	if err != nil || got["Destination"] != "https://events.example/metal3" {
		t.Fatalf("Subscription(5) = %v, %v", got, err)
	}
	if got, err := ev.Subscription(ctx, "1"); err != nil || got["Context"] != "WebUser3" {
		t.Fatalf("Subscription(1) = %v, %v", got, err)
	}

	if err := ev.DeleteSubscription(ctx, "5"); err != nil {
		t.Fatalf("DeleteSubscription: %v", err)
	}
	if col, _ := ev.Subscriptions(ctx); col["Members@odata.count"] != float64(4) {
		t.Fatalf("after the delete: %v", col["Members"])
	}
	err = ev.DeleteSubscription(ctx, "5")
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "HTTP 404") || !strings.Contains(err.Error(), "/redfish/v1/EventService/Subscriptions/5 was not found") {
		t.Fatalf("delete of a deleted subscription: %v", err)
	}
	if !slices.Equal(b.actionLog(), []string{"Subscribe https://events.example/metal3", "Unsubscribe /redfish/v1/EventService/Subscriptions/5"}) {
		t.Fatalf("BMC actions %v", b.actionLog())
	}

	// The BMC refuses what it cannot deliver, and says why.
	_, err = ev.CreateSubscription(ctx, map[string]any{"Destination": "https://events.example/x", "Protocol": "SNMPv2c"})
	if err == nil || !strings.Contains(err.Error(), "SNMPv2c for the property Protocol is not in the list") {
		t.Fatalf("create with a protocol the BMC refuses: %v", err)
	}
}

// A service without an EventService cannot subscribe: not supported, not
// retried.
func TestRedfishEventSubscriptionsWithoutAnEventService(t *testing.T) {
	b := startBMC(t, "dmtf-public-rackmount1", func(b *recordedBMC) { delete(b.docs["/redfish/v1"], "EventService") })
	d := newTestRedfish(t, b.info(nil))
	_, err := d.(EventSubscriber).Subscriptions(context.Background())
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "links no EventService") {
		t.Fatalf("Subscriptions = %v", err)
	}
}
