package apiserver

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/ironflow/ironflow/networkdata"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/pyliteral"
	"github.com/ironflow/ironflow/store"
)

type (
	nodeField  = field[store.Node, store.NodeFilter]
	nodeFilter = listFilter[store.NodeFilter]
	node       = store.Node
	nodeQuery  = store.NodeFilter
)

// nodeFields is the node's field table (fields.go derives the rest from
// it), in the order Ironic prints a node. Adding a field is one row here
// (plus its store column; see docs/contributing.md, "Add an API field").
var nodeFields = []nodeField{
	{name: "uuid", since: 1, value: uuidFor(func(n *node) *string { return &n.UUID }), access: createOnly, sortable: true},
	{name: "created_at", since: 1, value: timestamp(func(n *node) time.Time { return n.CreatedAt }), sortable: true},
	{name: "updated_at", since: 1, value: optTime(func(n *node) *time.Time { return n.UpdatedAt }), sortable: true},
	{name: "automated_clean", since: v47AutomatedClean, value: optFlag(func(n *node) **bool { return &n.AutomatedClean }), access: writable},
	{name: "bios_interface", since: v40BIOSIface, value: ifaceName(func(n *node) *string { return &n.BIOSInterface }), access: writable},
	{name: "boot_interface", since: v31DynamicIfaces, value: ifaceName(func(n *node) *string { return &n.BootInterface }), access: writable},
	{name: "boot_mode", since: v75BootMode, value: optText(func(n *node) **string { return &n.BootMode }, 0)},
	{name: "clean_step", since: v7NodeClean, value: dict(func(n *node) *map[string]any { return &n.CleanStep })},
	{name: "conductor_group", since: v46ConductorGroup, value: text(func(n *node) *string { return &n.ConductorGroup }).setBy(setConductorGroup), access: writable, sortable: true,
		filter: &nodeFilter{since: v46ConductorGroup, empty: true, apply: filterConductorGroup}},
	{name: "console_enabled", since: 1, value: flag(func(n *node) *bool { return &n.ConsoleEnabled }, false).setBy(setConsoleEnabled), access: createOnly},
	{name: "console_interface", since: v31DynamicIfaces, value: ifaceName(func(n *node) *string { return &n.ConsoleInterface }), access: writable},
	{name: "deploy_interface", since: v31DynamicIfaces, value: ifaceName(func(n *node) *string { return &n.DeployInterface }), access: writable},
	{name: "deploy_step", since: v44DeployStep, value: dict(func(n *node) *map[string]any { return &n.DeployStep })},
	{name: "description", since: v51Description, value: optText(func(n *node) **string { return &n.Description }, 4096), access: writable},
	{name: "disable_power_off", since: v95DisablePowerOff, value: flag(func(n *node) *bool { return &n.DisablePowerOff }, false), access: writable},
	{name: "driver", since: 1, value: text(func(n *node) *string { return &n.Driver }), access: writable, required: true, sortable: true,
		filter: textFilter(v16DriverFilter, func(f *nodeQuery) *string { return &f.Driver })},
	{name: "driver_info", since: 1, value: secretDict(func(n *node) *map[string]any { return &n.DriverInfo }, scopeDriverInfo), access: writable},
	{name: "driver_internal_info", since: v3DriverInternal, value: secretDict(func(n *node) *map[string]any { return &n.DriverInternalInfo }, scopeDriverInternalInfo)},
	{name: "extra", since: 1, value: dict(func(n *node) *map[string]any { return &n.Extra }), access: writable},
	{name: "fault", since: v42Fault, value: optText(func(n *node) **string { return &n.Fault }, 0),
		filter: oneOfFilter(v42Fault, func(f *nodeQuery) *string { return &f.Fault }, validFaults, unknownFault)},
	// health: written by the power sync only (activities/powersync.go).
	{name: "health", since: v109NodeHealth, value: optText(func(n *node) **string { return &n.Health }, 0)},
	{name: "firmware_interface", since: v86FirmwareInterface, value: ifaceName(func(n *node) *string { return &n.FirmwareInterface }), access: writable},
	{name: "inspection_finished_at", since: v6InspectState, value: optTime(func(n *node) *time.Time { return n.InspectionFinishedAt })},
	{name: "inspection_started_at", since: v6InspectState, value: optTime(func(n *node) *time.Time { return n.InspectionStartedAt })},
	{name: "inspect_interface", since: v31DynamicIfaces, value: ifaceName(func(n *node) *string { return &n.InspectInterface }), access: writable},
	{name: "instance_info", since: 1, value: secretDict(func(n *node) *map[string]any { return &n.InstanceInfo }, scopeInstanceInfo), access: writable},
	{name: "instance_uuid", since: 1, value: optText(func(n *node) **string { return &n.InstanceUUID }, 0).setBy(setInstanceUUID), access: writable, sortable: true,
		filter: textFilter(1, func(f *nodeQuery) *string { return &f.InstanceUUID })},
	{name: "instance_name", since: v104NodeInstanceName, value: optText(func(n *node) **string { return &n.InstanceName }, 255).setBy(setInstanceName), access: writable,
		filter: textFilter(v104NodeInstanceName, func(f *nodeQuery) *string { return &f.InstanceName })},
	{name: "last_error", since: 1, value: optText(func(n *node) **string { return &n.LastError }, 0)},
	{name: "lessee", since: v65Lessee, value: optText(func(n *node) **string { return &n.Lessee }, 255), access: writable, sortable: true,
		filter: textFilter(v65Lessee, func(f *nodeQuery) *string { return &f.Lessee })},
	{name: "maintenance", since: 1, value: flag(func(n *node) *bool { return &n.Maintenance }, false), access: writable, sortable: true,
		filter: boolFilter(func(f *nodeQuery) **bool { return &f.Maintenance })},
	{name: "maintenance_reason", since: 1, value: optText(func(n *node) **string { return &n.MaintenanceReason }, maxMaintenanceReason)},
	{name: "management_interface", since: v31DynamicIfaces, value: ifaceName(func(n *node) *string { return &n.ManagementInterface }), access: writable},
	{name: "name", since: v5NodeName, value: optText(func(n *node) **string { return &n.Name }, 0).setBy(setNodeName), access: writable, sortable: true},
	{name: "network_data", since: v66NetworkData, value: dict(func(n *node) *map[string]any { return &n.NetworkData }).setBy(setNetworkData), access: writable},
	{name: "network_interface", since: v20NetworkIface, value: ifaceName(func(n *node) *string { return &n.NetworkInterface }), access: writable},
	{name: "owner", since: v50Owner, value: optText(func(n *node) **string { return &n.Owner }, 255), access: writable, sortable: true,
		filter: textFilter(v50Owner, func(f *nodeQuery) *string { return &f.Owner })},
	{name: "power_interface", since: v31DynamicIfaces, value: ifaceName(func(n *node) *string { return &n.PowerInterface }), access: writable},
	{name: "power_state", since: 1, value: optText(func(n *node) **string { return &n.PowerState }, 0), sortable: true},
	{name: "properties", since: 1, value: dict(func(n *node) *map[string]any { return &n.Properties }), access: writable},
	{name: "protected", since: v48Protected, value: flag(func(n *node) *bool { return &n.Protected }, false), access: writable},
	{name: "protected_reason", since: v48Protected, value: optText(func(n *node) **string { return &n.ProtectedReason }, 255), access: writable},
	{name: "provision_state", since: 1, value: shown(func(n *node, v viewCtx) any { return provisionStateAt(n.ProvisionState, v.minor) }), sortable: true,
		filter: oneOfFilter(v9ProvisionFilter, func(f *nodeQuery) *provision.State { return &f.ProvisionState }, provision.KnownStates(), unknownProvisionState)},
	{name: "provision_updated_at", since: 1, value: optTime(func(n *node) *time.Time { return n.ProvisionUpdatedAt }), sortable: true},
	{name: "raid_config", since: v12RAIDConfig, value: dict(func(n *node) *map[string]any { return &n.RAIDConfig })},
	{name: "raid_interface", since: v31DynamicIfaces, value: ifaceName(func(n *node) *string { return &n.RAIDInterface }), access: writable},
	{name: "rescue_interface", since: v38RescueIface, value: ifaceName(func(n *node) *string { return &n.RescueInterface }), access: writable},
	{name: "reservation", since: 1, value: optText(func(n *node) **string { return &n.Reservation }, 0)},
	{name: "resource_class", since: v21ResourceClass, value: optText(func(n *node) **string { return &n.ResourceClass }, 80), access: writable, sortable: true,
		filter: textFilter(v21ResourceClass, func(f *nodeQuery) *string { return &f.ResourceClass })},
	{name: "retired", since: v61Retired, value: flag(func(n *node) *bool { return &n.Retired }, false), access: writable,
		filter: boolFilter(func(f *nodeQuery) **bool { return &f.Retired })},
	{name: "retired_reason", since: v61Retired, value: optText(func(n *node) **string { return &n.RetiredReason }, 255), access: writable},
	{name: "secure_boot", since: v75BootMode, value: optFlag(func(n *node) **bool { return &n.SecureBoot })},
	{name: "parent_node", since: v83ParentChildNodes, value: optText(func(n *node) **string { return &n.ParentNode }, 0).setBy(setParentNode), access: writable},
	{name: "service_step", since: v87Service, value: dict(func(n *node) *map[string]any { return &n.ServiceStep })},
	{name: "shard", since: v82Shard, value: optText(func(n *node) **string { return &n.Shard }, 255), access: writable,
		filter: &nodeFilter{since: v82Shard, apply: filterShards}},
	{name: "storage_interface", since: v33StorageIface, value: ifaceName(func(n *node) *string { return &n.StorageInterface }), access: writable},
	{name: "target_power_state", since: 1, value: optText(func(n *node) **string { return &n.TargetPowerState }, 0)},
	{name: "target_provision_state", since: 1, value: shown(viewTargetProvisionState)},
	{name: "target_raid_config", since: v12RAIDConfig, value: dict(func(n *node) *map[string]any { return &n.TargetRAIDConfig })},
	{name: "traits", since: v37Traits, value: shown(viewTraits)},
	{name: "vendor_interface", since: v31DynamicIfaces, value: ifaceName(func(n *node) *string { return &n.VendorInterface }), access: writable},
	{name: "links", since: 1, value: links(func(n *node) string { return "nodes/" + n.UUID })},
	// conductor: a live worker serving the node's group (conductors.go).
	{name: "conductor", since: v49Conductors, value: computed(func(n *node, v viewCtx) any { return v.ring.pick(n) })},
	{name: "allocation_uuid", since: v52Allocation, value: optText(func(n *node) **string { return &n.AllocationUUID }, 0)},
	{name: "chassis_uuid", since: 1, value: optText(func(n *node) **string { return &n.ChassisUUID }, 0).setBy(setChassisUUID), access: writable,
		filter: &nodeFilter{since: 1, apply: filterChassisUUID}},
	{name: "ports", since: 1, value: links(func(n *node) string { return "nodes/" + n.UUID + "/ports" })},
	{name: "states", since: v14StateLinks, value: links(func(n *node) string { return "nodes/" + n.UUID + "/states" })},
	{name: "portgroups", since: v24PortgroupSub, value: links(func(n *node) string { return "nodes/" + n.UUID + "/portgroups" })},
	{name: "volume", since: v32Volume, value: links(func(n *node) string { return "nodes/" + n.UUID + "/volume" })},
}

// nodeResource is the node resource derived from nodeFields.
// "associated" filters on instance_uuid being set, "sharded" on shard.
var nodeResource = newResource("node", nodeFields, nil,
	namedFilter[store.NodeFilter]{"associated", boolFilter(func(f *nodeQuery) **bool { return &f.Associated })},
	namedFilter[store.NodeFilter]{"sharded", &nodeFilter{since: v82Shard, apply: filterSharded}})

// nodeDefaultFields are the keys of a node in a list without detail, in
// the order the "next" link repeats them.
var nodeDefaultFields = []string{"instance_uuid", "maintenance", "power_state", "provision_state", "uuid", "name"}

// validFaults are Ironic's node faults.
var validFaults = []string{"power failure", "clean failure", "rescue abort failure", "service failure"}

func unknownProvisionState(v string) error {
	return badRequest("Provision state \"%s\" is not valid", v)
}

func unknownFault(v string) error {
	return badRequest("Unrecognized fault \"%s\" is specified, allowed faults are %s", v, pyliteral.List(validFaults))
}

// filterConductorGroup: groups compare lowercased; an empty value selects
// the default group.
func filterConductorGroup(f *nodeQuery, _, v string) (string, error) {
	g := strings.ToLower(v)
	f.ConductorGroup = &g
	return v, nil
}

// provisionStateAt renames states for old clients: "available" was "no
// state" (null) before 1.2, "inspect wait" was "inspecting" before 1.39.
func provisionStateAt(state provision.State, minor int) any {
	if state == provision.Available && minor < v2AvailableState {
		return nil
	}
	if state == provision.InspectWait && minor < v39InspectWait {
		return provision.Inspecting
	}
	return state
}

func viewTargetProvisionState(n *node, v viewCtx) any {
	if n.TargetProvisionState == nil {
		return nil
	}
	return provisionStateAt(*n.TargetProvisionState, v.minor)
}

func viewTraits(n *node, _ viewCtx) any {
	if n.Traits == nil {
		return []string{}
	}
	return n.Traits
}

var conductorGroupRE = regexp.MustCompile(`^[a-zA-Z0-9_\-\.]{0,255}$`)

func setConductorGroup(n *node, v any) error {
	switch t := v.(type) {
	case nil:
		n.ConductorGroup = ""
	case string:
		if !conductorGroupRE.MatchString(t) {
			return badRequest("Invalid conductor_group %s: it may only contain letters, digits, '_', '-' and '.', up to 255 characters", pyliteral.Repr(t))
		}
		n.ConductorGroup = strings.ToLower(t)
	default:
		return typeErr(v, "string", "null")
	}
	return nil
}

// setConsoleEnabled: create only; null leaves the default.
func setConsoleEnabled(n *node, v any) error {
	if v == nil {
		return nil
	}
	b, err := boolValue(v)
	if err != nil {
		return err
	}
	n.ConsoleEnabled = b
	return nil
}

// setInstanceName: Ironic's schema gives instance_name (API 1.104) a
// length of 1 to 255.
// setNetworkData sets network_data when Ironic's node schema accepts it:
// null, {} or network_data (package networkdata).
func setNetworkData(n *node, v any) error {
	if msg := networkdata.FieldError(v); msg != "" {
		return errors.New(msg)
	}
	return dict(func(n *node) *map[string]any { return &n.NetworkData }).set(n, v)
}

func setInstanceName(n *node, v any) error {
	if s, ok := v.(string); ok && s == "" {
		return fmt.Errorf("'' is too short")
	}
	return optText(func(n *node) **string { return &n.InstanceName }, 255).set(n, v)
}

// syncInstanceName copies instance_info's display_name into an unset
// instance_name when a PATCH changed instance_info, as Ironic's node
// controller does for clients (Nova) that only know display_name.
func syncInstanceName(n *node, instanceInfoChanged bool) {
	if !instanceInfoChanged || n.InstanceName != nil && *n.InstanceName != "" {
		return
	}
	if dn, ok := n.InstanceInfo["display_name"].(string); ok && dn != "" {
		n.InstanceName = &dn
	}
}

func setInstanceUUID(n *node, v any) error {
	switch t := v.(type) {
	case nil:
		n.InstanceUUID = nil
	case string:
		if _, err := uuid.Parse(t); err != nil || len(t) < 32 {
			return badRequest("Expected UUID for instance_uuid: %s", t)
		}
		s := strings.ToLower(t)
		n.InstanceUUID = &s
	default:
		return typeErr(v, "string", "null")
	}
	return nil
}

func setNodeName(n *node, v any) error {
	switch t := v.(type) {
	case nil:
		n.Name = nil
	case string:
		if !validNodeName(t) {
			return badRequest("Cannot create node with invalid name '%s'", t)
		}
		s := t
		n.Name = &s
	default:
		return typeErr(v, "string", "null")
	}
	return nil
}

// nodeNameRE is RFC 3986's unreserved characters, Ironic's logical names.
var nodeNameRE = regexp.MustCompile(`^[A-Za-z0-9\-._~]{1,255}$`)

func validNodeName(name string) bool {
	if !nodeNameRE.MatchString(name) {
		return false
	}
	_, err := uuid.Parse(name)
	return err != nil
}

// isUUID reports whether s looks like a UUID as Ironic's is_uuid_like does.
func isUUID(s string) bool {
	if len(s) != 36 && len(s) != 32 {
		return false
	}
	_, err := uuid.Parse(s)
	return err == nil
}
