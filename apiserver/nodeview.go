package apiserver

import (
	"bytes"
	"encoding/json"
	"math"
	"sort"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// viewCtx is what rendering needs besides the resource: the version and the
// base URL of links.
type viewCtx struct {
	minor int
	base  string
}

// nodeField is one key of Ironic's node object: the version that introduced
// it and how to read it.
type nodeField struct {
	name  string
	since int
	get   func(n *store.Node, v viewCtx) any
}

func strOrNil(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}

func boolOrNil(p *bool) any {
	if p == nil {
		return nil
	}
	return *p
}

// isoTime formats t as Python's datetime.isoformat() of an aware UTC time,
// which is what Ironic prints: microseconds only when not zero.
func isoTime(t time.Time) string {
	t = t.UTC()
	if t.Nanosecond()/1000 == 0 {
		return t.Format("2006-01-02T15:04:05+00:00")
	}
	return t.Format("2006-01-02T15:04:05.000000+00:00")
}

func timeOrNil(p *time.Time) any {
	if p == nil {
		return nil
	}
	return isoTime(*p)
}

func mapOrEmpty(m map[string]any) any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// nodeFields lists the node's keys in the order Ironic prints them.
var nodeFields = []nodeField{
	{"uuid", 1, func(n *store.Node, _ viewCtx) any { return n.UUID }},
	{"created_at", 1, func(n *store.Node, _ viewCtx) any { return isoTime(n.CreatedAt) }},
	{"updated_at", 1, func(n *store.Node, _ viewCtx) any { return timeOrNil(n.UpdatedAt) }},
	{"automated_clean", v47AutomatedClean, func(n *store.Node, _ viewCtx) any { return boolOrNil(n.AutomatedClean) }},
	{"bios_interface", v40BIOSIface, func(n *store.Node, _ viewCtx) any { return n.BIOSInterface }},
	{"boot_interface", v31DynamicIfaces, func(n *store.Node, _ viewCtx) any { return n.BootInterface }},
	{"boot_mode", v75BootMode, func(n *store.Node, _ viewCtx) any { return strOrNil(n.BootMode) }},
	{"clean_step", v7NodeClean, func(n *store.Node, _ viewCtx) any { return mapOrEmpty(n.CleanStep) }},
	{"conductor_group", v46ConductorGroup, func(n *store.Node, _ viewCtx) any { return n.ConductorGroup }},
	{"console_enabled", 1, func(n *store.Node, _ viewCtx) any { return n.ConsoleEnabled }},
	{"console_interface", v31DynamicIfaces, func(n *store.Node, _ viewCtx) any { return n.ConsoleInterface }},
	{"deploy_interface", v31DynamicIfaces, func(n *store.Node, _ viewCtx) any { return n.DeployInterface }},
	{"deploy_step", v44DeployStep, func(n *store.Node, _ viewCtx) any { return mapOrEmpty(n.DeployStep) }},
	{"description", v51Description, func(n *store.Node, _ viewCtx) any { return strOrNil(n.Description) }},
	{"driver", 1, func(n *store.Node, _ viewCtx) any { return n.Driver }},
	{"driver_info", 1, func(n *store.Node, _ viewCtx) any { return maskSecrets(n.DriverInfo, scopeDriverInfo) }},
	{"driver_internal_info", v3DriverInternal, func(n *store.Node, _ viewCtx) any {
		return maskSecrets(n.DriverInternalInfo, scopeDriverInternalInfo)
	}},
	{"extra", 1, func(n *store.Node, _ viewCtx) any { return mapOrEmpty(n.Extra) }},
	{"fault", v42Fault, func(n *store.Node, _ viewCtx) any { return strOrNil(n.Fault) }},
	{"inspection_finished_at", v6InspectState, func(n *store.Node, _ viewCtx) any { return timeOrNil(n.InspectionFinishedAt) }},
	{"inspection_started_at", v6InspectState, func(n *store.Node, _ viewCtx) any { return timeOrNil(n.InspectionStartedAt) }},
	{"inspect_interface", v31DynamicIfaces, func(n *store.Node, _ viewCtx) any { return n.InspectInterface }},
	{"instance_info", 1, func(n *store.Node, _ viewCtx) any { return maskSecrets(n.InstanceInfo, scopeInstanceInfo) }},
	{"instance_uuid", 1, func(n *store.Node, _ viewCtx) any { return strOrNil(n.InstanceUUID) }},
	{"last_error", 1, func(n *store.Node, _ viewCtx) any { return strOrNil(n.LastError) }},
	{"lessee", v65Lessee, func(n *store.Node, _ viewCtx) any { return strOrNil(n.Lessee) }},
	{"maintenance", 1, func(n *store.Node, _ viewCtx) any { return n.Maintenance }},
	{"maintenance_reason", 1, func(n *store.Node, _ viewCtx) any { return strOrNil(n.MaintenanceReason) }},
	{"management_interface", v31DynamicIfaces, func(n *store.Node, _ viewCtx) any { return n.ManagementInterface }},
	{"name", v5NodeName, func(n *store.Node, _ viewCtx) any { return strOrNil(n.Name) }},
	{"network_data", v66NetworkData, func(n *store.Node, _ viewCtx) any { return mapOrEmpty(n.NetworkData) }},
	{"network_interface", v20NetworkIface, func(n *store.Node, _ viewCtx) any { return n.NetworkInterface }},
	{"owner", v50Owner, func(n *store.Node, _ viewCtx) any { return strOrNil(n.Owner) }},
	{"power_interface", v31DynamicIfaces, func(n *store.Node, _ viewCtx) any { return n.PowerInterface }},
	{"power_state", 1, func(n *store.Node, _ viewCtx) any { return strOrNil(n.PowerState) }},
	{"properties", 1, func(n *store.Node, _ viewCtx) any { return mapOrEmpty(n.Properties) }},
	{"protected", v48Protected, func(n *store.Node, _ viewCtx) any { return n.Protected }},
	{"protected_reason", v48Protected, func(n *store.Node, _ viewCtx) any { return strOrNil(n.ProtectedReason) }},
	{"provision_state", 1, func(n *store.Node, v viewCtx) any { return provisionStateAt(n.ProvisionState, v.minor) }},
	{"provision_updated_at", 1, func(n *store.Node, _ viewCtx) any { return timeOrNil(n.ProvisionUpdatedAt) }},
	{"raid_config", v12RAIDConfig, func(n *store.Node, _ viewCtx) any { return mapOrEmpty(n.RAIDConfig) }},
	{"raid_interface", v31DynamicIfaces, func(n *store.Node, _ viewCtx) any { return n.RAIDInterface }},
	{"rescue_interface", v38RescueIface, func(n *store.Node, _ viewCtx) any { return n.RescueInterface }},
	{"reservation", 1, func(n *store.Node, _ viewCtx) any { return strOrNil(n.Reservation) }},
	{"resource_class", v21ResourceClass, func(n *store.Node, _ viewCtx) any { return strOrNil(n.ResourceClass) }},
	{"retired", v61Retired, func(n *store.Node, _ viewCtx) any { return n.Retired }},
	{"retired_reason", v61Retired, func(n *store.Node, _ viewCtx) any { return strOrNil(n.RetiredReason) }},
	{"secure_boot", v75BootMode, func(n *store.Node, _ viewCtx) any { return boolOrNil(n.SecureBoot) }},
	{"shard", v82Shard, func(n *store.Node, _ viewCtx) any { return strOrNil(n.Shard) }},
	{"storage_interface", v33StorageIface, func(n *store.Node, _ viewCtx) any { return n.StorageInterface }},
	{"target_power_state", 1, func(n *store.Node, _ viewCtx) any { return strOrNil(n.TargetPowerState) }},
	{"target_provision_state", 1, func(n *store.Node, v viewCtx) any {
		if n.TargetProvisionState == nil {
			return nil
		}
		return provisionStateAt(*n.TargetProvisionState, v.minor)
	}},
	{"target_raid_config", v12RAIDConfig, func(n *store.Node, _ viewCtx) any { return mapOrEmpty(n.TargetRAIDConfig) }},
	{"traits", v37Traits, func(n *store.Node, _ viewCtx) any {
		if n.Traits == nil {
			return []string{}
		}
		return n.Traits
	}},
	{"vendor_interface", v31DynamicIfaces, func(n *store.Node, _ viewCtx) any { return n.VendorInterface }},
	{"links", 1, func(n *store.Node, v viewCtx) any { return selfLinks(v.base, "nodes/"+n.UUID) }},
	// conductor: the API does not know which worker serves a node.
	{"conductor", v49Conductors, func(n *store.Node, _ viewCtx) any { return nil }},
	{"allocation_uuid", v52Allocation, func(n *store.Node, _ viewCtx) any { return nil }},
	{"chassis_uuid", 1, func(n *store.Node, _ viewCtx) any { return strOrNil(n.ChassisUUID) }},
	{"ports", 1, func(n *store.Node, v viewCtx) any { return selfLinks(v.base, "nodes/"+n.UUID+"/ports") }},
	{"states", v14StateLinks, func(n *store.Node, v viewCtx) any { return selfLinks(v.base, "nodes/"+n.UUID+"/states") }},
	{"portgroups", v24PortgroupSub, func(n *store.Node, v viewCtx) any {
		return selfLinks(v.base, "nodes/"+n.UUID+"/portgroups")
	}},
	{"volume", v32Volume, func(n *store.Node, v viewCtx) any { return selfLinks(v.base, "nodes/"+n.UUID+"/volume") }},
}

var nodeFieldByName = func() map[string]*nodeField {
	m := make(map[string]*nodeField, len(nodeFields))
	for i := range nodeFields {
		m[nodeFields[i].name] = &nodeFields[i]
	}
	return m
}()

// nodeDefaultFields are the keys of a node in a list without detail.
var nodeDefaultFields = []string{"instance_uuid", "maintenance", "power_state", "provision_state", "uuid", "name"}

// provisionStateAt renames states for old clients: "available" was "no
// state" (null) before 1.2, "inspect wait" was "inspecting" before 1.39.
func provisionStateAt(state string, minor int) any {
	if state == workflows.StateAvailable && minor < v2AvailableState {
		return nil
	}
	if state == workflows.StateInspectWait && minor < v39InspectWait {
		return workflows.StateInspecting
	}
	return state
}

// fieldSet selects keys; nil means every key the version allows.
type fieldSet map[string]bool

// newFieldSet is the selection for ?fields=; nil fields selects all.
func newFieldSet(fields []string) fieldSet {
	if fields == nil {
		return nil
	}
	sel := fieldSet{}
	for _, f := range fields {
		sel[f] = true
	}
	return sel
}

// writeNode appends the node's JSON object to buf: the keys the version
// allows, limited to fields (links always), secrets masked.
func writeNode(buf *bytes.Buffer, n *store.Node, v viewCtx, fields fieldSet) {
	buf.WriteByte('{')
	first := true
	for i := range nodeFields {
		f := &nodeFields[i]
		if f.since > v.minor {
			continue
		}
		if fields != nil && !fields[f.name] && f.name != "links" {
			continue
		}
		if !first {
			buf.WriteByte(',')
		}
		first = false
		writeJSONString(buf, f.name)
		buf.WriteByte(':')
		writeValue(buf, f.get(n, v))
	}
	buf.WriteByte('}')
}

// writeValue encodes v, taking a fast path for the scalar types node fields
// hold so that listing thousands of nodes stays cheap.
func writeValue(buf *bytes.Buffer, v any) {
	switch t := v.(type) {
	case nil:
		buf.WriteString("null")
	case string:
		writeJSONString(buf, t)
	case bool:
		if t {
			buf.WriteString("true")
		} else {
			buf.WriteString("false")
		}
	case int:
		buf.WriteString(strconv.Itoa(t))
	case int64:
		buf.WriteString(strconv.FormatInt(t, 10))
	case float64:
		if math.IsInf(t, 0) || math.IsNaN(t) {
			buf.WriteString("null")
			return
		}
		writeMarshal(buf, t)
	case map[string]any:
		// Keys sorted, as encoding/json does, without its reflection.
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeJSONString(buf, k)
			buf.WriteByte(':')
			writeValue(buf, t[k])
		}
		buf.WriteByte('}')
	case []any:
		buf.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeValue(buf, e)
		}
		buf.WriteByte(']')
	default:
		writeMarshal(buf, t)
	}
}

func writeMarshal(buf *bytes.Buffer, v any) {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		buf.WriteString("null")
		return
	}
	// Encode appends a newline.
	buf.Truncate(buf.Len() - 1)
}

// writeJSONString writes s as a JSON string without HTML escaping.
func writeJSONString(buf *bytes.Buffer, s string) {
	buf.WriteByte('"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			buf.WriteString(s[start:i])
			switch c {
			case '"':
				buf.WriteString(`\"`)
			case '\\':
				buf.WriteString(`\\`)
			case '\n':
				buf.WriteString(`\n`)
			case '\r':
				buf.WriteString(`\r`)
			case '\t':
				buf.WriteString(`\t`)
			default:
				buf.WriteString(`\u00`)
				buf.WriteByte("0123456789abcdef"[c>>4])
				buf.WriteByte("0123456789abcdef"[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			buf.WriteString(s[start:i])
			buf.WriteString(`\ufffd`)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			buf.WriteString(s[start:i])
			buf.WriteString(`\u202`)
			buf.WriteByte("0123456789abcdef"[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	buf.WriteString(s[start:])
	buf.WriteByte('"')
}
