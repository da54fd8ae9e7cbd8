package apiserver

import (
	"regexp"
	"strings"
	"time"

	"github.com/ironflow/ironflow/pyliteral"
	"github.com/ironflow/ironflow/store"
)

type (
	portField = field[store.Port, store.PortFilter]
	port      = store.Port
	portQuery = store.PortFilter
)

// portFields is the port's field table (fields.go derives the rest from
// it), in the order Ironic prints a port.
var portFields = []portField{
	{name: "uuid", since: 1, value: uuidFor(func(p *port) *string { return &p.UUID }), access: createOnly, sortable: true},
	{name: "created_at", since: 1, value: timestamp(func(p *port) time.Time { return p.CreatedAt }), sortable: true},
	{name: "updated_at", since: 1, value: optTime(func(p *port) *time.Time { return p.UpdatedAt }), sortable: true},
	{name: "address", since: 1, value: text(func(p *port) *string { return &p.Address }).setBy(setPortAddress), access: writable, required: true, sortable: true,
		filter: &listFilter[portQuery]{since: 1, apply: filterPortAddress}},
	{name: "extra", since: 1, value: dict(func(p *port) *map[string]any { return &p.Extra }), access: writable},
	{name: "internal_info", since: v18PortInternalInfo, value: dict(func(p *port) *map[string]any { return &p.InternalInfo })},
	{name: "is_smartnic", since: v53SmartNIC, value: flag(func(p *port) *bool { return &p.IsSmartNIC }, false), access: writable},
	{name: "local_link_connection", since: v19PortAdvanced, value: localLinkConnection(), access: writable},
	{name: "name", since: v88PortName, value: optText(func(p *port) **string { return &p.Name }, 255).setBy(setPortName), access: writable},
	{name: "physical_network", since: v34PhysicalNetwork, value: optText(func(p *port) **string { return &p.PhysicalNetwork }, 0), access: writable},
	{name: "pxe_enabled", since: v19PortAdvanced, value: flag(func(p *port) *bool { return &p.PXEEnabled }, true), access: writable},
	{name: "node_uuid", since: 1, value: text(func(p *port) *string { return &p.NodeUUID }).setBy(setPortNode), access: writable, required: true},
	{name: "links", since: 1, value: links(func(p *port) string { return "ports/" + p.UUID })},
	{name: "portgroup_uuid", since: v24PortgroupSub, value: optText(func(p *port) **string { return &p.PortgroupUUID }, 0).setBy(setPortgroup), access: writable},
	{name: "description", since: v97PortDescription, value: optText(func(p *port) **string { return &p.Description }, 255), access: writable},
	{name: "vendor", since: v100PortVendor, value: optText(func(p *port) **string { return &p.Vendor }, 32), access: writable},
	{name: "category", since: v101PortCategory, value: optText(func(p *port) **string { return &p.Category }, 80), access: writable},
	{name: "available_for_dynamic_portgroup", since: v111DynamicPortgroup, value: strictFlag(func(p *port) *bool { return &p.AvailableForDynamicPortgroup }), access: writable},
}

// portResource is the port resource derived from portFields. The "node"
// (or "node_uuid") filter finds the node first: writePortList reads it.
var portResource = newResource("port", portFields, nil,
	// ?conductor_groups=a,b (API 1.99): the ports of nodes in these groups.
	namedFilter[portQuery]{"conductor_groups", &listFilter[portQuery]{since: v99ConductorGroupsFilter, apply: func(f *portQuery, _, v string) (string, error) {
		f.ConductorGroups = splitList(v)
		return v, nil
	}}},
	// ?description_contains= (with the field, API 1.97).
	namedFilter[portQuery]{"description_contains", textFilter(v97PortDescription, func(f *portQuery) *string { return &f.DescriptionContains })},
)

var portDefaultFields = []string{"uuid", "address"}

// setPortName: a port's name (API 1.88) identifies it as a node's name
// does, so it takes the same logical-name rules.
func setPortName(p *port, v any) error {
	switch t := v.(type) {
	case nil:
		p.Name = nil
	case string:
		if !validNodeName(t) {
			return badRequest("Cannot create port with invalid name '%s'", t)
		}
		s := t
		p.Name = &s
	default:
		return typeErr(v, "string", "null")
	}
	return nil
}

// macRE is what oslo's is_valid_mac accepts (after lowercasing).
var macRE = regexp.MustCompile(`^([0-9a-f]{2}[:-]){5}[0-9a-f]{2}$`)

// normalizeMAC validates a MAC address and returns it lowercase with ':'
// separators, as stored.
func normalizeMAC(s string) (string, bool) {
	l := strings.ToLower(strings.TrimSpace(s))
	if !macRE.MatchString(l) {
		return "", false
	}
	return strings.ReplaceAll(l, "-", ":"), true
}

func invalidMAC(v any) *apiError {
	if s, ok := v.(string); ok {
		return badRequest("Expected a MAC address but received %s.", s)
	}
	return badRequest("Expected a MAC address but received %s.", pyliteral.Repr(v))
}

func setPortAddress(p *port, v any) error {
	s, ok := v.(string)
	mac, valid := normalizeMAC(s)
	if !ok || !valid {
		return invalidMAC(v)
	}
	p.Address = mac
	return nil
}

func filterPortAddress(f *portQuery, _, v string) (string, error) {
	mac, ok := normalizeMAC(v)
	if !ok {
		return "", invalidMAC(v)
	}
	f.Address = mac
	return mac, nil
}

func setPortNode(p *port, v any) error {
	s, ok := v.(string)
	if !ok || !isUUID(s) {
		return badRequest("Expected UUID for node_uuid: %v", v)
	}
	p.NodeUUID = strings.ToLower(s)
	return nil
}

// setPortgroup takes a port group's UUID or null; the store checks that the
// group exists and is on the port's node (portWriteError).
func setPortgroup(p *port, v any) error {
	switch t := v.(type) {
	case nil:
		p.PortgroupUUID = nil
	case string:
		if !isUUID(t) {
			return badRequest("Expected UUID for portgroup_uuid: %s", t)
		}
		u := strings.ToLower(t)
		p.PortgroupUUID = &u
	default:
		return typeErr(v, "string", "null")
	}
	return nil
}

// localLinkConnection is the port's dict with its versioned view.
func localLinkConnection() fieldValue[port] {
	fv := dict(func(p *port) *map[string]any { return &p.LocalLinkConnection })
	fv.view = viewLocalLinkConnection
	return fv
}

// splitList reads a comma-separated query value as Ironic's
// args.string_list: the items, trimmed, empty ones dropped.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
