package apiserver

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/pyliteral"
	"github.com/ironflow/ironflow/store"
)

// POST /v1/events (API 1.54): Neutron tells the bare metal service that a
// port was bound, unbound or deleted. Ironic's events controller
// (ironic/api/controllers/v1/event.py) validates the body and only logs
// each event: its network interfaces that act on ports (neutron) do so
// from their own calls to Neutron, and the noop and flat interfaces,
// ironflow's, have nothing to do. ironflow records a valid event in the
// history of the node it concerns, when it finds one, so that an operator
// sees what Neutron said; the answer is Ironic's 204 either way.

// networkEvents are the event names Ironic's EVENT_VALIDATORS accept, in
// its order (the order its enum message lists them).
var networkEvents = []string{"network.bind_port", "network.unbind_port", "network.delete_port"}

// networkEventKeys are the keys of a network event, in the order of
// Ironic's NETWORK_EVENT_VALIDATOR schema; the first four are required.
var networkEventKeys = []struct {
	name     string
	nullable bool
	// uuid: checked as args.uuid after the schema, in the order of its
	// dict_valid (port_id, mac_address, device_id, binding:host_id).
	uuid bool
}{
	{"event", false, false}, {"port_id", false, true}, {"mac_address", false, false}, {"status", false, false},
	{"device_id", true, true}, {"binding:host_id", true, true}, {"binding:vnic_type", true, false},
}

// eventMAC is what Ironic 21.4's utils.is_valid_mac accepts (lowercased):
// colons only.
var eventMAC = regexp.MustCompile(`^[0-9a-f]{2}(:[0-9a-f]{2}){5}$`)

// networkEvent is one valid event.
type networkEvent struct {
	Event, PortID, MAC, Status string
	DeviceID, HostID, VNICType string
}

func (s *server) postEvents(c *gin.Context) error {
	body, err := readBodyLimit(c, maxBodyBytes)
	if err != nil {
		return err
	}
	var v any = map[string]any{}
	if len(strings.TrimSpace(string(body))) > 0 {
		if err := decodeJSON(body, &v); err != nil {
			// Ironic answers 500 for a body that is not JSON; a client's
			// mistake is a 400 here.
			return badRequest("Invalid JSON in request body: %s", err.Error())
		}
	}
	events, err := checkEvents(v)
	if err != nil {
		return err
	}
	// Ironic's controller validates the body before it checks the version:
	// a bad body is a 400 at any version, a good one a 404 below 1.54.
	if ver(c) < v54Events {
		return resourceNotFound()
	}
	for _, e := range events {
		if err := s.recordNetworkEvent(c, e); err != nil {
			return err
		}
	}
	writeEmpty(c, http.StatusNoContent, "")
	return nil
}

// recordNetworkEvent writes e into the history of the node it concerns:
// the node of the port with e's MAC address, else the node whose UUID is
// e's binding:host_id (Neutron binds a bare metal port to its node's
// UUID). An event about no node of this service is ignored, as Ironic
// ignores every event.
func (s *server) recordNetworkEvent(c *gin.Context, e networkEvent) error {
	ctx := c.Request.Context()
	node := ""
	ports, err := s.store.ListPorts(ctx, store.PortFilter{Address: e.MAC, Limit: 1})
	if err != nil {
		return fmt.Errorf("find the port of network event %s: %w", e.PortID, err)
	}
	if len(ports) > 0 {
		node = ports[0].NodeUUID
	} else if e.HostID != "" {
		n, err := s.store.GetNode(ctx, e.HostID)
		switch {
		case err == nil:
			node = n.UUID
		case !errors.Is(err, store.ErrNotFound):
			return fmt.Errorf("find the node of network event %s: %w", e.PortID, err)
		}
	}
	if node == "" {
		return nil
	}
	text := fmt.Sprintf("Network event %s for port %s (MAC %s): status %s", e.Event, e.PortID, e.MAC, e.Status)
	if e.DeviceID != "" {
		text += ", device " + e.DeviceID
	}
	if e.VNICType != "" {
		text += ", vnic_type " + e.VNICType
	}
	s.addHistory(c, node, store.SeverityInfo, "network", text)
	return nil
}

// checkEvents is Ironic 21.4's validation of the body, with its messages:
// EVENTS_SCHEMA over the whole body, then each event's own schema, then
// its UUIDs and MAC address (event.py, args.schema, args.uuid,
// args.mac_address).
func checkEvents(v any) ([]networkEvent, error) {
	if msg := bestSchemaError(eventsSchemaErrors(v)); msg != "" {
		return nil, schemaError("evts", errors.New(msg))
	}
	var out []networkEvent
	for _, item := range v.(map[string]any)["events"].([]any) {
		ev := item.(map[string]any)
		if msg := bestSchemaError(networkEventErrors(ev)); msg != "" {
			return nil, schemaError("evts", errors.New(msg))
		}
		text := func(k string) string { s, _ := ev[k].(string); return s }
		for _, k := range []string{"port_id", "mac_address", "device_id", "binding:host_id"} {
			val, set := ev[k].(string)
			switch {
			case !set: // absent, or null where the schema allows it
			case k == "mac_address" && !eventMAC.MatchString(strings.ToLower(val)):
				return nil, badRequest("Expected valid MAC address for %s: %s", k, val)
			case k != "mac_address" && !isUUIDLike(val):
				return nil, badRequest("Expected UUID for %s: %s", k, val)
			}
		}
		out = append(out, networkEvent{
			Event: text("event"), PortID: text("port_id"), MAC: strings.ToLower(text("mac_address")), Status: text("status"),
			DeviceID: text("device_id"), HostID: text("binding:host_id"), VNICType: text("binding:vnic_type"),
		})
	}
	return out, nil
}

// jsonschemaError is one error jsonschema reports, with the depth of the
// value it is about.
type jsonschemaError struct {
	depth int
	msg   string
}

// bestSchemaError is jsonschema's best_match among errs, for schemas
// without anyOf or oneOf: the least deep error, the first of those in the
// order the validator found them. "" when errs is empty.
func bestSchemaError(errs []jsonschemaError) string {
	best := -1
	for i, e := range errs {
		if best < 0 || e.depth < errs[best].depth {
			best = i
		}
	}
	if best < 0 {
		return ""
	}
	return errs[best].msg
}

// eventsSchemaErrors are the errors of Ironic's EVENTS_SCHEMA, in
// jsonschema's order (each schema's keywords as written: type,
// properties, required, additionalProperties).
func eventsSchemaErrors(v any) []jsonschemaError {
	body, ok := v.(map[string]any)
	if !ok {
		return []jsonschemaError{{0, typeErr(v, "object").Error()}}
	}
	var errs []jsonschemaError
	if events, set := body["events"]; set {
		list, ok := events.([]any)
		switch {
		case !ok:
			errs = append(errs, jsonschemaError{1, typeErr(events, "array").Error()})
		case len(list) == 0:
			errs = append(errs, jsonschemaError{1, "[] is too short"})
		}
		for _, item := range list {
			ev, ok := item.(map[string]any)
			if !ok {
				errs = append(errs, jsonschemaError{2, typeErr(item, "object").Error()})
				continue
			}
			if name, set := ev["event"]; set {
				if _, ok := name.(string); !ok {
					errs = append(errs, jsonschemaError{3, typeErr(name, "string").Error()})
				}
				if !slices.Contains(networkEvents, fmt.Sprint(name)) || !isString(name) {
					errs = append(errs, jsonschemaError{3, fmt.Sprintf("%s is not one of %s", pyliteral.Repr(name), pyliteral.List(networkEvents))})
				}
			} else {
				errs = append(errs, jsonschemaError{2, "'event' is a required property"})
			}
		}
	} else {
		errs = append(errs, jsonschemaError{0, "'events' is a required property"})
	}
	return append(errs, additionalProperties(body, []string{"events"})...)
}

// networkEventErrors are the errors of Ironic's NETWORK_EVENT_VALIDATOR
// schema for one event.
func networkEventErrors(ev map[string]any) []jsonschemaError {
	var errs []jsonschemaError
	known := make([]string, 0, len(networkEventKeys))
	for _, k := range networkEventKeys {
		known = append(known, k.name)
		val, set := ev[k.name]
		if !set || isString(val) || (k.nullable && val == nil) {
			continue
		}
		if k.nullable {
			errs = append(errs, jsonschemaError{1, typeErr(val, "string", "null").Error()})
		} else {
			errs = append(errs, jsonschemaError{1, typeErr(val, "string").Error()})
		}
	}
	for _, k := range networkEventKeys[:4] {
		if _, set := ev[k.name]; !set {
			errs = append(errs, jsonschemaError{0, fmt.Sprintf("'%s' is a required property", k.name)})
		}
	}
	return append(errs, additionalProperties(ev, known)...)
}

// additionalProperties is jsonschema's additionalProperties error for the
// keys of obj not in allowed (sorted: the decoded object has lost the
// order the client wrote them in).
func additionalProperties(obj map[string]any, allowed []string) []jsonschemaError {
	var extra []string
	for k := range obj {
		if !slices.Contains(allowed, k) {
			extra = append(extra, k)
		}
	}
	if len(extra) == 0 {
		return nil
	}
	return []jsonschemaError{{0, additionalProps(extra).Error()}}
}

func isString(v any) bool {
	_, ok := v.(string)
	return ok
}

// isUUIDLike is oslo's uuidutils.is_uuid_like, which args.uuid checks:
// any spelling Python's uuid.UUID reads (with or without hyphens, braces
// or a urn:uuid: prefix).
func isUUIDLike(s string) bool {
	t := strings.ToLower(s)
	t = strings.TrimPrefix(t, "urn:")
	t = strings.TrimPrefix(t, "uuid:")
	t = strings.Trim(t, "{}")
	t = strings.ReplaceAll(t, "-", "")
	return len(t) == 32 && isUUID(t)
}
