package apiserver

import (
	"net/http"
	"strings"
	"time"

	"github.com/ironflow/ironflow/store"
)

type (
	portgroupField = field[store.Portgroup, store.PortgroupFilter]
	portgroup      = store.Portgroup
	portgroupQuery = store.PortgroupFilter
)

// portgroupFields is the port group's field table (fields.go derives the
// rest from it), in the order Ironic prints a port group.
var portgroupFields = []portgroupField{
	{name: "uuid", since: v23Portgroups, value: uuidFor(func(g *portgroup) *string { return &g.UUID }), access: createOnly, sortable: true},
	{name: "created_at", since: v23Portgroups, value: timestamp(func(g *portgroup) time.Time { return g.CreatedAt }), sortable: true},
	{name: "updated_at", since: v23Portgroups, value: optTime(func(g *portgroup) *time.Time { return g.UpdatedAt }), sortable: true},
	{name: "address", since: v23Portgroups, value: optText(func(g *portgroup) **string { return &g.Address }, 0).setBy(setPortgroupAddress), access: writable, sortable: true,
		filter: &listFilter[portgroupQuery]{since: v23Portgroups, apply: filterPortgroupAddress}},
	{name: "extra", since: v23Portgroups, value: dict(func(g *portgroup) *map[string]any { return &g.Extra }), access: writable},
	{name: "internal_info", since: v23Portgroups, value: dict(func(g *portgroup) *map[string]any { return &g.InternalInfo })},
	{name: "mode", since: v26PortgroupMode, value: text(func(g *portgroup) *string { return &g.Mode }).setBy(setPortgroupMode), access: writable, keep: true, sortable: true},
	{name: "name", since: v23Portgroups, value: optText(func(g *portgroup) **string { return &g.Name }, 255).setBy(setPortgroupName), access: writable, sortable: true},
	{name: "properties", since: v26PortgroupMode, value: dict(func(g *portgroup) *map[string]any { return &g.Properties }), access: writable},
	{name: "standalone_ports_supported", since: v23Portgroups, value: flag(func(g *portgroup) *bool { return &g.StandalonePortsSupported }, true), access: writable},
	{name: "node_uuid", since: v23Portgroups, value: text(func(g *portgroup) *string { return &g.NodeUUID }).setBy(setPortgroupNode), access: writable, required: true},
	{name: "physical_network", since: v102PortgroupPhysnet, value: optText(func(g *portgroup) **string { return &g.PhysicalNetwork }, 64), access: writable},
	{name: "category", since: v103PortgroupCategory, value: optText(func(g *portgroup) **string { return &g.Category }, 80), access: writable},
	{name: "dynamic_portgroup", since: v111DynamicPortgroup, value: shown(func(g *portgroup, _ viewCtx) any { return g.DynamicPortgroup })},
	{name: "links", since: v23Portgroups, value: links(func(g *portgroup) string { return "portgroups/" + g.UUID })},
	{name: "ports", since: v23Portgroups, value: links(func(g *portgroup) string { return "portgroups/" + g.UUID + "/ports" })},
}

// portgroupResource is the port group resource derived from
// portgroupFields. The "node" filter finds the node first: writePortgroupList
// reads it.
var portgroupResource = newResource("portgroup", portgroupFields, nil,
	// ?conductor_groups=a,b (API 1.99), ?shard=a,b (1.106): the groups of
	// nodes in these conductor groups or shards.
	namedFilter[portgroupQuery]{"conductor_groups", &listFilter[portgroupQuery]{since: v99ConductorGroupsFilter, apply: func(f *portgroupQuery, _, v string) (string, error) {
		f.ConductorGroups = splitList(v)
		return v, nil
	}}},
	namedFilter[portgroupQuery]{"shard", &listFilter[portgroupQuery]{since: v106PortgroupShard, apply: func(f *portgroupQuery, _, v string) (string, error) {
		f.Shards = splitList(v)
		return v, nil
	}}},
)

// portgroupDefaultFields are the keys of a group in a list without detail,
// as Ironic's portgroup controller.
var portgroupDefaultFields = []string{"uuid", "address", "name"}

func setPortgroupAddress(g *portgroup, v any) error {
	if v == nil {
		g.Address = nil
		return nil
	}
	s, ok := v.(string)
	mac, valid := normalizeMAC(s)
	if !ok || !valid {
		return invalidMAC(v)
	}
	g.Address = &mac
	return nil
}

func filterPortgroupAddress(f *portgroupQuery, _, v string) (string, error) {
	mac, ok := normalizeMAC(v)
	if !ok {
		return "", invalidMAC(v)
	}
	f.Address = mac
	return mac, nil
}

// setPortgroupMode: PATCH may not remove the mode (Ironic's message); a
// create that gives null gets the default (createPortgroup drops it).
func setPortgroupMode(g *portgroup, v any) error {
	switch t := v.(type) {
	case nil:
		return badRequest("'mode' is a mandatory attribute and can not be removed")
	case string:
		g.Mode = t
		return nil
	}
	return typeErr(v, "string", "null")
}

// setPortgroupName: a logical name as Ironic's is_valid_logical_name (the
// create message; PATCH checks names first with its own, see
// checkPortgroupPatchNames).
func setPortgroupName(g *portgroup, v any) error {
	switch t := v.(type) {
	case nil:
		g.Name = nil
	case string:
		if !validNodeName(t) {
			return badRequest("Cannot create portgroup with invalid name '%s'", t)
		}
		s := t
		g.Name = &s
	default:
		return typeErr(v, "string", "null")
	}
	return nil
}

func setPortgroupNode(g *portgroup, v any) error {
	s, ok := v.(string)
	if !ok || !isUUID(s) {
		return badRequest("Expected UUID for node_uuid: %v", v)
	}
	g.NodeUUID = strings.ToLower(s)
	return nil
}

// checkPortgroupPatchNames refuses a PATCH that sets an invalid name, with
// the message Ironic's PATCH gives (it names the group as addressed).
func checkPortgroupPatchNames(ident string, ops []patchOp) error {
	for _, op := range ops {
		if op.Path != "/name" || op.Op == "remove" {
			continue
		}
		if s, ok := op.Value.(string); ok && s != "" && !validNodeName(s) {
			return errorf(http.StatusBadRequest, "Portgroup %s: Cannot change name to invalid name '%s'", ident, s)
		}
	}
	return nil
}
