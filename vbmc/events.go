package vbmc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"
)

// The EventService (DMTF's EventService and EventDestination schemas):
// clients subscribe a Destination for event types; the subscriptions are
// the service's, not one VM's, and live as long as the server. The
// HttpHeaders a subscription carries (a credential of the destination, as
// Metal3 sends them) are kept for the deliveries and never shown: the
// schema wants them null or empty in responses. The one event the service
// sends is the test event of EventService.SubmitTestEvent, POSTed to every
// Redfish subscription whose EventTypes take it.

const (
	eventServicePath  = redfishRoot + "/EventService"
	subscriptionsPath = eventServicePath + "/Subscriptions"
	// eventDeliveryTimeout bounds one delivery to a destination.
	eventDeliveryTimeout = 10 * time.Second
)

// eventTypes are the EventTypesForSubscription the service takes.
var eventTypes = []string{"StatusChange", "ResourceUpdated", "ResourceAdded", "ResourceRemoved", "Alert"}

type subscription struct {
	id, destination, context, protocol string
	eventTypes                         []string
	headers                            []map[string]string
}

type events struct {
	mu     sync.Mutex
	next   int
	subs   map[string]*subscription
	client *http.Client
}

func (s *Server) routeEventService(mux *http.ServeMux) {
	s.events = &events{next: 1, subs: map[string]*subscription{}, client: &http.Client{Timeout: eventDeliveryTimeout}}
	mux.HandleFunc("GET "+eventServicePath, s.handleEventService)
	mux.HandleFunc("GET "+subscriptionsPath, s.handleSubscriptions)
	mux.HandleFunc("POST "+subscriptionsPath, s.handleSubscribe)
	mux.HandleFunc("GET "+subscriptionsPath+"/{sub}", s.handleSubscription)
	mux.HandleFunc("DELETE "+subscriptionsPath+"/{sub}", s.handleUnsubscribe)
	mux.HandleFunc("POST "+eventServicePath+"/Actions/EventService.SubmitTestEvent", s.handleTestEvent)
}

func (s *Server) handleEventService(w http.ResponseWriter, r *http.Request) {
	writeJSONResponse(w, http.StatusOK, map[string]any{
		odataID: eventServicePath, odataType: "#EventService.v1_9_0.EventService",
		"Id": "EventService", "Name": "Event Service", "Status": okStatus(), "ServiceEnabled": true,
		"DeliveryRetryAttempts": 1, "DeliveryRetryIntervalSeconds": 1,
		"EventTypesForSubscription": eventTypes,
		"Subscriptions":             link(subscriptionsPath),
		"Actions": map[string]any{"#EventService.SubmitTestEvent": map[string]any{
			"target": eventServicePath + "/Actions/EventService.SubmitTestEvent"}},
	})
}

func (s *Server) handleSubscriptions(w http.ResponseWriter, r *http.Request) {
	s.events.mu.Lock()
	ids := make([]int, 0, len(s.events.subs))
	for id := range s.events.subs {
		n, _ := strconv.Atoi(id)
		ids = append(ids, n)
	}
	s.events.mu.Unlock()
	slices.Sort(ids)
	members := make([]string, len(ids))
	for i, id := range ids {
		members[i] = fmt.Sprintf("%s/%d", subscriptionsPath, id)
	}
	writeJSONResponse(w, http.StatusOK, collection(subscriptionsPath, "#EventDestinationCollection.EventDestinationCollection", "Event Subscriptions Collection", members))
}

func (sub *subscription) json() map[string]any {
	return map[string]any{
		odataID: subscriptionsPath + "/" + sub.id, odataType: "#EventDestination.v1_13_0.EventDestination",
		"Id": sub.id, "Name": "EventSubscription " + sub.id, "Destination": sub.destination,
		"EventTypes": sub.eventTypes, "Context": sub.context, "Protocol": sub.protocol,
		"SubscriptionType": "RedfishEvent", "HttpHeaders": []any{},
	}
}

// subscriptionBody is a POST to the collection. Context is a pointer: the
// schema requires it, and an empty one is a context all the same.
type subscriptionBody struct {
	Destination string              `json:"Destination"`
	EventTypes  []string            `json:"EventTypes"`
	Context     *string             `json:"Context"`
	Protocol    string              `json:"Protocol"`
	HttpHeaders []map[string]string `json:"HttpHeaders"`
}

// maxContext is the length of Context the service keeps, as BMCs bound it
// (the schema sets no limit; 256 is common).
const maxContext = 256

// handleSubscribe creates a subscription, refusing what it could not
// deliver with the Base registry's messages, as a BMC does.
func (s *Server) handleSubscribe(w http.ResponseWriter, r *http.Request) {
	var b subscriptionBody
	if !decodeBody(w, r, &b) {
		return
	}
	if b.Destination == "" {
		writeError(w, http.StatusBadRequest, "PropertyMissing", "The property Destination is a required property and must be included in the request.")
		return
	}
	if u, err := url.Parse(b.Destination); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		writeError(w, http.StatusBadRequest, "PropertyValueFormatError", fmt.Sprintf("The value '%s' for the property Destination is not a format that the property can accept.", b.Destination))
		return
	}
	if b.Protocol != "Redfish" {
		writeError(w, http.StatusBadRequest, "PropertyValueNotInList", fmt.Sprintf("The value '%s' for the property Protocol is not in the list of acceptable values.", b.Protocol))
		return
	}
	if b.Context == nil {
		writeError(w, http.StatusBadRequest, "PropertyMissing", "The property Context is a required property and must be included in the request.")
		return
	}
	if len(*b.Context) > maxContext {
		writeError(w, http.StatusBadRequest, "PropertyValueFormatError", fmt.Sprintf("The value for the property Context is longer than %d characters.", maxContext))
		return
	}
	for _, t := range b.EventTypes {
		if !slices.Contains(eventTypes, t) {
			writeError(w, http.StatusBadRequest, "PropertyValueNotInList", fmt.Sprintf("The value '%s' for the property EventTypes is not in the list of acceptable values.", t))
			return
		}
	}
	if len(b.EventTypes) == 0 {
		b.EventTypes = []string{"Alert"}
	}
	s.events.mu.Lock()
	sub := &subscription{id: strconv.Itoa(s.events.next), destination: b.Destination, context: *b.Context,
		protocol: b.Protocol, eventTypes: b.EventTypes, headers: b.HttpHeaders}
	s.events.next++
	s.events.subs[sub.id] = sub
	s.events.mu.Unlock()
	s.log.Info("event subscription created", "subscription", sub.id, "destination", sub.destination)
	w.Header().Set("Location", subscriptionsPath+"/"+sub.id)
	writeJSONResponse(w, http.StatusCreated, sub.json())
}

func (s *Server) subscription(w http.ResponseWriter, r *http.Request) (*subscription, bool) {
	s.events.mu.Lock()
	sub, ok := s.events.subs[r.PathValue("sub")]
	s.events.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "ResourceMissingAtURI", fmt.Sprintf("The resource at the URI %s was not found.", r.URL.Path))
	}
	return sub, ok
}

func (s *Server) handleSubscription(w http.ResponseWriter, r *http.Request) {
	if sub, ok := s.subscription(w, r); ok {
		writeJSONResponse(w, http.StatusOK, sub.json())
	}
}

func (s *Server) handleUnsubscribe(w http.ResponseWriter, r *http.Request) {
	sub, ok := s.subscription(w, r)
	if !ok {
		return
	}
	s.events.mu.Lock()
	delete(s.events.subs, sub.id)
	s.events.mu.Unlock()
	s.log.Info("event subscription deleted", "subscription", sub.id)
	w.WriteHeader(http.StatusNoContent)
}

// handleTestEvent sends one Alert event (DMTF's Event schema) to every
// subscription that takes Alert, with the subscription's HttpHeaders and
// Context, and answers once each was tried: 204, or 400 naming the
// destinations that did not take it.
func (s *Server) handleTestEvent(w http.ResponseWriter, r *http.Request) {
	var b struct{ Message string }
	if !decodeBody(w, r, &b) {
		return
	}
	s.events.mu.Lock()
	var subs []*subscription
	for _, sub := range s.events.subs {
		if slices.Contains(sub.eventTypes, "Alert") {
			subs = append(subs, sub)
		}
	}
	s.events.mu.Unlock()
	var failed []string
	for _, sub := range subs {
		if err := s.events.deliver(s.ctx, sub, b.Message); err != nil {
			s.log.Warn("event delivery failed", "subscription", sub.id, "destination", sub.destination, "error", err)
			failed = append(failed, sub.destination)
		}
	}
	if len(failed) > 0 {
		writeError(w, http.StatusBadRequest, "EventSubscriptionLimitExceeded", fmt.Sprintf("The test event was not delivered to %v.", failed))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (e *events) deliver(ctx context.Context, sub *subscription, message string) error {
	body, _ := json.Marshal(map[string]any{
		odataType: "#Event.v1_7_0.Event", "Id": "test", "Name": "Test Event", "Context": sub.context,
		"Events": []any{map[string]any{"EventType": "Alert", "EventId": "test", "Message": message,
			"MessageId": "Base.1.8.Success", "EventTimestamp": time.Now().UTC().Format(time.RFC3339)}},
	})
	ctx, cancel := context.WithTimeout(ctx, eventDeliveryTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, sub.destination, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	for _, h := range sub.headers {
		for k, v := range h {
			req.Header.Set(k, v)
		}
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return nil
}
