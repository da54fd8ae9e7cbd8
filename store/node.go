package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/ironflow/ironflow/provision"
)

// Node is one bare-metal machine, with Ironic's field names.
// The JSON maps are never nil when read back (stored as {}).
type Node struct {
	// ID is the internal serial: the default pagination order. Not in the API.
	ID   int64   `json:"-" db:"id"`
	UUID string  `json:"uuid" db:"uuid"`
	Name *string `json:"name" db:"name"`

	Driver              string `json:"driver" db:"driver"`
	BIOSInterface       string `json:"bios_interface" db:"bios_interface"`
	BootInterface       string `json:"boot_interface" db:"boot_interface"`
	ConsoleInterface    string `json:"console_interface" db:"console_interface"`
	DeployInterface     string `json:"deploy_interface" db:"deploy_interface"`
	FirmwareInterface   string `json:"firmware_interface" db:"firmware_interface"`
	InspectInterface    string `json:"inspect_interface" db:"inspect_interface"`
	ManagementInterface string `json:"management_interface" db:"management_interface"`
	NetworkInterface    string `json:"network_interface" db:"network_interface"`
	PowerInterface      string `json:"power_interface" db:"power_interface"`
	RAIDInterface       string `json:"raid_interface" db:"raid_interface"`
	RescueInterface     string `json:"rescue_interface" db:"rescue_interface"`
	StorageInterface    string `json:"storage_interface" db:"storage_interface"`
	VendorInterface     string `json:"vendor_interface" db:"vendor_interface"`

	ProvisionState       provision.State  `json:"provision_state" db:"provision_state"`
	TargetProvisionState *provision.State `json:"target_provision_state" db:"target_provision_state"`
	PowerState           *string          `json:"power_state" db:"power_state"`
	TargetPowerState     *string          `json:"target_power_state" db:"target_power_state"`

	Maintenance       bool    `json:"maintenance" db:"maintenance"`
	MaintenanceReason *string `json:"maintenance_reason" db:"maintenance_reason"`
	Fault             *string `json:"fault" db:"fault"`
	// Health (API 1.109) is the BMC's hardware health as the power sync
	// last read it: "OK", "Warning", "Critical", or nil when unknown.
	Health          *string `json:"health" db:"health"`
	LastError       *string `json:"last_error" db:"last_error"`
	Reservation     *string `json:"reservation" db:"reservation"`
	ConductorGroup  string  `json:"conductor_group" db:"conductor_group"`
	ResourceClass   *string `json:"resource_class" db:"resource_class"`
	Description     *string `json:"description" db:"description"`
	Owner           *string `json:"owner" db:"owner"`
	Lessee          *string `json:"lessee" db:"lessee"`
	AutomatedClean  *bool   `json:"automated_clean" db:"automated_clean"`
	Protected       bool    `json:"protected" db:"protected"`
	ProtectedReason *string `json:"protected_reason" db:"protected_reason"`
	Retired         bool    `json:"retired" db:"retired"`
	RetiredReason   *string `json:"retired_reason" db:"retired_reason"`
	InstanceUUID    *string `json:"instance_uuid" db:"instance_uuid"`
	// InstanceName (API 1.104) is the instance's human-readable name.
	InstanceName   *string  `json:"instance_name" db:"instance_name"`
	ChassisUUID    *string  `json:"chassis_uuid" db:"chassis_uuid"`
	ConsoleEnabled bool     `json:"console_enabled" db:"console_enabled"`
	BootMode       *string  `json:"boot_mode" db:"boot_mode"`
	SecureBoot     *bool    `json:"secure_boot" db:"secure_boot"`
	Shard          *string  `json:"shard" db:"shard"`
	ParentNode     *string  `json:"parent_node" db:"parent_node"`
	Traits         []string `json:"traits" db:"traits"`

	// DisablePowerOff: the machine must never be powered off (API 1.95,
	// Ironic's disable_power_off: a BMC or NIC that loses power with it):
	// reboots replace power cycles and the agent is locked down instead
	// of powering the machine off (docs/api-versions.md).
	DisablePowerOff bool `json:"disable_power_off" db:"disable_power_off"`

	// AllocationUUID is the allocation that holds the node (API 1.52),
	// written only by the allocation's claim and release
	// (allocation.go), never by UpdateNode.
	AllocationUUID *string `json:"allocation_uuid" db:"allocation_uuid"`

	DriverInfo         map[string]any `json:"driver_info" db:"driver_info"`
	DriverInternalInfo map[string]any `json:"driver_internal_info" db:"driver_internal_info"`
	InstanceInfo       map[string]any `json:"instance_info" db:"instance_info"`
	Properties         map[string]any `json:"properties" db:"properties"`
	Extra              map[string]any `json:"extra" db:"extra"`
	CleanStep          map[string]any `json:"clean_step" db:"clean_step"`
	DeployStep         map[string]any `json:"deploy_step" db:"deploy_step"`
	ServiceStep        map[string]any `json:"service_step" db:"service_step"`
	NetworkData        map[string]any `json:"network_data" db:"network_data"`
	RAIDConfig         map[string]any `json:"raid_config" db:"raid_config"`
	TargetRAIDConfig   map[string]any `json:"target_raid_config" db:"target_raid_config"`

	CreatedAt            time.Time  `json:"created_at" db:"created_at"`
	UpdatedAt            *time.Time `json:"updated_at" db:"updated_at"`
	ProvisionUpdatedAt   *time.Time `json:"provision_updated_at" db:"provision_updated_at"`
	InspectionStartedAt  *time.Time `json:"inspection_started_at" db:"inspection_started_at"`
	InspectionFinishedAt *time.Time `json:"inspection_finished_at" db:"inspection_finished_at"`
}

// NodeFilter selects nodes for ListNodes and CountNodes. Zero values match all.
type NodeFilter struct {
	ProvisionState provision.State
	Driver         string
	Maintenance    *bool
	ConductorGroup *string // "" is a valid group, hence the pointer
	Associated     *bool   // instance_uuid set
	ResourceClass  string
	Fault          string
	Owner          string
	Lessee         string
	// Project selects the nodes it owns or leases.
	Project      string
	InstanceUUID string
	// InstanceName selects nodes with this instance_name (API 1.104).
	InstanceName string
	Retired      *bool
	// Shards selects nodes in any of these shards (API 1.82 ?shard=).
	Shards []string
	// Sharded selects nodes with (true) or without (false) a shard.
	Sharded *bool
	// ChassisUUID selects the nodes of one chassis.
	ChassisUUID string
	// ParentNode selects the children of one node (API 1.83 ?parent_node=,
	// GET /v1/nodes/{node}/children), by UUID.
	ParentNode string
	// ExcludeChildren leaves out the nodes that have a parent: Ironic's
	// node list from 1.83 on, unless ?include_children=True.
	ExcludeChildren bool

	// Limit caps the rows returned; 0 means no limit.
	Limit int
	// Marker is a node UUID: only rows after it in the sort order are returned.
	Marker string
	// SortKey is a column name (see SortKeys); default "id".
	SortKey string
	// SortDir is "asc" (default) or "desc".
	SortDir string
	// Fields, when set, limits the columns read (Ironic field names, e.g.
	// the API's non-detail list or ?fields=); the other fields stay zero.
	// id and uuid are always read. Decoding the JSON columns is most of the
	// cost of a detailed list, so leave them out when they are not shown.
	Fields []string
}

// nodeField ties a nodes column to its Node field, so that one list drives
// SELECT, INSERT, UPDATE and Scan in the same order.
type nodeField struct {
	col string
	ptr func(n *Node) any
	// writable: written by CreateNode and UpdateNode (not id, uuid,
	// created_at, updated_at, provision_updated_at: the database sets those).
	writable bool
}

var nodeFields = []nodeField{
	{"id", func(n *Node) any { return &n.ID }, false},
	{"uuid", func(n *Node) any { return &n.UUID }, false},
	{"name", func(n *Node) any { return &n.Name }, true},
	{"driver", func(n *Node) any { return &n.Driver }, true},
	{"bios_interface", func(n *Node) any { return &n.BIOSInterface }, true},
	{"boot_interface", func(n *Node) any { return &n.BootInterface }, true},
	{"console_interface", func(n *Node) any { return &n.ConsoleInterface }, true},
	{"deploy_interface", func(n *Node) any { return &n.DeployInterface }, true},
	{"firmware_interface", func(n *Node) any { return &n.FirmwareInterface }, true},
	{"inspect_interface", func(n *Node) any { return &n.InspectInterface }, true},
	{"management_interface", func(n *Node) any { return &n.ManagementInterface }, true},
	{"network_interface", func(n *Node) any { return &n.NetworkInterface }, true},
	{"power_interface", func(n *Node) any { return &n.PowerInterface }, true},
	{"raid_interface", func(n *Node) any { return &n.RAIDInterface }, true},
	{"rescue_interface", func(n *Node) any { return &n.RescueInterface }, true},
	{"storage_interface", func(n *Node) any { return &n.StorageInterface }, true},
	{"vendor_interface", func(n *Node) any { return &n.VendorInterface }, true},
	{"provision_state", func(n *Node) any { return &n.ProvisionState }, true},
	{"target_provision_state", func(n *Node) any { return &n.TargetProvisionState }, true},
	{"power_state", func(n *Node) any { return &n.PowerState }, true},
	{"target_power_state", func(n *Node) any { return &n.TargetPowerState }, true},
	{"maintenance", func(n *Node) any { return &n.Maintenance }, true},
	{"maintenance_reason", func(n *Node) any { return &n.MaintenanceReason }, true},
	{"fault", func(n *Node) any { return &n.Fault }, true},
	{"health", func(n *Node) any { return &n.Health }, true},
	{"last_error", func(n *Node) any { return &n.LastError }, true},
	{"reservation", func(n *Node) any { return &n.Reservation }, true},
	{"conductor_group", func(n *Node) any { return &n.ConductorGroup }, true},
	{"resource_class", func(n *Node) any { return &n.ResourceClass }, true},
	{"description", func(n *Node) any { return &n.Description }, true},
	{"owner", func(n *Node) any { return &n.Owner }, true},
	{"lessee", func(n *Node) any { return &n.Lessee }, true},
	{"automated_clean", func(n *Node) any { return &n.AutomatedClean }, true},
	{"protected", func(n *Node) any { return &n.Protected }, true},
	{"disable_power_off", func(n *Node) any { return &n.DisablePowerOff }, true},
	{"protected_reason", func(n *Node) any { return &n.ProtectedReason }, true},
	{"retired", func(n *Node) any { return &n.Retired }, true},
	{"retired_reason", func(n *Node) any { return &n.RetiredReason }, true},
	{"instance_uuid", func(n *Node) any { return &n.InstanceUUID }, true},
	{"instance_name", func(n *Node) any { return &n.InstanceName }, true},
	{"allocation_uuid", func(n *Node) any { return &n.AllocationUUID }, false},
	{"chassis_uuid", func(n *Node) any { return &n.ChassisUUID }, true},
	{"console_enabled", func(n *Node) any { return &n.ConsoleEnabled }, true},
	{"boot_mode", func(n *Node) any { return &n.BootMode }, true},
	{"secure_boot", func(n *Node) any { return &n.SecureBoot }, true},
	{"shard", func(n *Node) any { return &n.Shard }, true},
	{"parent_node", func(n *Node) any { return &n.ParentNode }, true},
	{"traits", func(n *Node) any { return &n.Traits }, true},
	{"driver_info", func(n *Node) any { return &n.DriverInfo }, true},
	{"driver_internal_info", func(n *Node) any { return &n.DriverInternalInfo }, true},
	{"instance_info", func(n *Node) any { return &n.InstanceInfo }, true},
	{"properties", func(n *Node) any { return &n.Properties }, true},
	{"extra", func(n *Node) any { return &n.Extra }, true},
	{"clean_step", func(n *Node) any { return &n.CleanStep }, true},
	{"deploy_step", func(n *Node) any { return &n.DeployStep }, true},
	{"service_step", func(n *Node) any { return &n.ServiceStep }, true},
	{"network_data", func(n *Node) any { return &n.NetworkData }, true},
	{"raid_config", func(n *Node) any { return &n.RAIDConfig }, true},
	{"target_raid_config", func(n *Node) any { return &n.TargetRAIDConfig }, true},
	{"created_at", func(n *Node) any { return &n.CreatedAt }, false},
	{"updated_at", func(n *Node) any { return &n.UpdatedAt }, false},
	{"provision_updated_at", func(n *Node) any { return &n.ProvisionUpdatedAt }, false},
	{"inspection_started_at", func(n *Node) any { return &n.InspectionStartedAt }, true},
	{"inspection_finished_at", func(n *Node) any { return &n.InspectionFinishedAt }, true},
}

// nodeColumns is the SELECT/RETURNING list matching scanNode.
var nodeColumns = func() string {
	cols := make([]string, len(nodeFields))
	for i, f := range nodeFields {
		cols[i] = f.col
	}
	return strings.Join(cols, ", ")
}()

// scanNode reads one row of nodeColumns.
var scanNode = nodeScanner(nodeFields)

// nodeScanner reads rows holding the columns of fields, in order.
func nodeScanner(fields []nodeField) pgx.RowToFunc[*Node] {
	return func(row pgx.CollectableRow) (*Node, error) {
		n := &Node{}
		if err := row.Scan(nodeTargets(n, fields)...); err != nil {
			return nil, err
		}
		return n, nil
	}
}

// nodeTargets are the Scan destinations of fields in n, with room for
// more columns after them.
func nodeTargets(n *Node, fields []nodeField) []any {
	targets := make([]any, len(fields), len(fields)+1)
	for i, f := range fields {
		targets[i] = f.ptr(n)
	}
	return targets
}

// selectNodeFields returns the columns named by names (all when empty),
// always with id and uuid first.
func selectNodeFields(names []string) (cols string, fields []nodeField, err error) {
	if len(names) == 0 {
		return nodeColumns, nodeFields, nil
	}
	want := map[string]bool{"id": true, "uuid": true}
	for _, name := range names {
		found := false
		for _, f := range nodeFields {
			if f.col == name {
				found = true
				break
			}
		}
		if !found {
			return "", nil, fmt.Errorf("node field %q: %w", name, ErrInvalidInput)
		}
		want[name] = true
	}
	var list []string
	for _, f := range nodeFields {
		if want[f.col] {
			fields = append(fields, f)
			list = append(list, f.col)
		}
	}
	return strings.Join(list, ", "), fields, nil
}

// writableNodeValues returns the writable columns and their values, with the
// JSON maps and traits made non-nil so that they are stored as {} and '{}'.
func writableNodeValues(n *Node) (cols []string, vals []any) {
	for _, m := range []*map[string]any{&n.DriverInfo, &n.DriverInternalInfo, &n.InstanceInfo,
		&n.Properties, &n.Extra, &n.CleanStep, &n.DeployStep, &n.ServiceStep, &n.NetworkData, &n.RAIDConfig, &n.TargetRAIDConfig} {
		if *m == nil {
			*m = map[string]any{}
		}
	}
	if n.Traits == nil {
		n.Traits = []string{}
	}
	for _, f := range nodeFields {
		if f.writable {
			cols = append(cols, f.col)
			vals = append(vals, f.ptr(n))
		}
	}
	return cols, vals
}

// canonicalUUID returns the lowercase hyphenated form of a valid UUID.
func canonicalUUID(s string) (string, bool) {
	u, err := uuid.Parse(s)
	if err != nil {
		return s, false
	}
	return u.String(), true
}

// DefaultProvisionState is a new node's state when the caller sets none:
// Ironic's since API 1.11 (older microversions ask for "available").
const DefaultProvisionState = provision.Enroll

// CreateNode inserts n, filling UUID when empty and ID and CreatedAt from
// the database. The caller sets ProvisionState (empty: "enroll").
func (s *Store) CreateNode(ctx context.Context, n *Node) error {
	if err := newUUID(&n.UUID); err != nil {
		return fmt.Errorf("create node: %w", err)
	}
	if n.ProvisionState == "" {
		n.ProvisionState = DefaultProvisionState
	}
	cols, vals := writableNodeValues(n)
	cols = append(cols, "uuid")
	vals = append(vals, n.UUID)
	q := fmt.Sprintf("INSERT INTO nodes (%s) VALUES (%s) RETURNING id, created_at", strings.Join(cols, ", "), placeholders(1, len(cols)))
	err := s.pool.QueryRow(ctx, q, vals...).Scan(&n.ID, &n.CreatedAt)
	return dbError(err, "create node %s", n.UUID)
}

// placeholders returns "$from, ..., $(from+n-1)".
func placeholders(from, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("$" + strconv.Itoa(from+i))
	}
	return b.String()
}

// GetNode finds a node by UUID when uuidOrName is a valid UUID, else by name.
func (s *Store) GetNode(ctx context.Context, uuidOrName string) (*Node, error) {
	return getRow(ctx, s, nodeTable, nodeColumns, scanNode, uuidOrName, true)
}

// NodeColumns is a narrow read of nodes: the columns it names (id and uuid
// always among them) and the scanner of those alone. Decoding a node's
// JSON columns is most of what reading it costs, and an activity that
// needs a few of them need not decode the rest.
type NodeColumns struct {
	cols string
	scan pgx.RowToFunc[*Node]
}

// NewNodeColumns prepares a narrow read of the named columns; an unknown
// name is ErrInvalidInput.
func NewNodeColumns(names ...string) (NodeColumns, error) {
	cols, fields, err := selectNodeFields(names)
	if err != nil {
		return NodeColumns{}, err
	}
	return NodeColumns{cols: cols, scan: nodeScanner(fields)}, nil
}

// MustNodeColumns is NewNodeColumns for the fixed lists of package-level
// variables: an unknown name panics at start-up.
func MustNodeColumns(names ...string) NodeColumns {
	c, err := NewNodeColumns(names...)
	if err != nil {
		panic(err)
	}
	return c
}

// GetNodeColumns reads a node by UUID or name with only the columns of c;
// the node's other fields stay zero.
func (s *Store) GetNodeColumns(ctx context.Context, uuidOrName string, c NodeColumns) (*Node, error) {
	if c.scan == nil {
		return s.GetNode(ctx, uuidOrName)
	}
	return getRow(ctx, s, nodeTable, c.cols, c.scan, uuidOrName, true)
}

var nodeTable = table{name: "nodes", what: "node", whats: "nodes", sortKeys: NodeSortKeys}

// NodeSortKeys are the accepted NodeFilter.SortKey values. Nullable columns
// sort through COALESCE so that marker comparisons never meet NULL; the
// migrations index the same expressions.
var NodeSortKeys = map[string]string{
	"id":                   "id",
	"uuid":                 "uuid",
	"name":                 "COALESCE(name, '')",
	"created_at":           "created_at",
	"updated_at":           "COALESCE(updated_at, '-infinity'::timestamptz)",
	"provision_updated_at": "COALESCE(provision_updated_at, '-infinity'::timestamptz)",
	"provision_state":      "provision_state",
	"driver":               "driver",
	"conductor_group":      "conductor_group",
	"resource_class":       "COALESCE(resource_class, '')",
	"power_state":          "COALESCE(power_state, '')",
	"maintenance":          "maintenance",
	"instance_uuid":        "COALESCE(instance_uuid, '')",
	"owner":                "COALESCE(owner, '')",
	"lessee":               "COALESCE(lessee, '')",
}

// nodeWhere renders the filter conditions of f, numbering arguments from 1.
func nodeWhere(f NodeFilter) (conds []string, args []any) {
	eq := func(col string, v any) {
		args = append(args, v)
		conds = append(conds, fmt.Sprintf("%s = $%d", col, len(args)))
	}
	if f.ProvisionState != "" {
		eq("provision_state", f.ProvisionState)
	}
	if f.Driver != "" {
		eq("driver", f.Driver)
	}
	if f.Maintenance != nil {
		eq("maintenance", *f.Maintenance)
	}
	if f.ConductorGroup != nil {
		eq("conductor_group", *f.ConductorGroup)
	}
	if f.Associated != nil {
		if *f.Associated {
			conds = append(conds, "instance_uuid IS NOT NULL")
		} else {
			conds = append(conds, "instance_uuid IS NULL")
		}
	}
	if f.ResourceClass != "" {
		eq("resource_class", f.ResourceClass)
	}
	if f.Fault != "" {
		eq("fault", f.Fault)
	}
	if f.Owner != "" {
		eq("owner", f.Owner)
	}
	if f.Lessee != "" {
		eq("lessee", f.Lessee)
	}
	if f.Project != "" {
		args = append(args, f.Project)
		conds = append(conds, fmt.Sprintf("(owner = $%[1]d OR lessee = $%[1]d)", len(args)))
	}
	if f.InstanceUUID != "" {
		u, _ := canonicalUUID(f.InstanceUUID)
		eq("instance_uuid", u)
	}
	if f.InstanceName != "" {
		eq("instance_name", f.InstanceName)
	}
	if f.Retired != nil {
		eq("retired", *f.Retired)
	}
	if f.Shards != nil {
		args = append(args, f.Shards)
		conds = append(conds, fmt.Sprintf("shard = ANY($%d::text[])", len(args)))
	}
	if f.Sharded != nil {
		if *f.Sharded {
			conds = append(conds, "shard IS NOT NULL")
		} else {
			conds = append(conds, "shard IS NULL")
		}
	}
	if f.ChassisUUID != "" {
		u, _ := canonicalUUID(f.ChassisUUID)
		eq("chassis_uuid", u)
	}
	if f.ParentNode != "" {
		u, _ := canonicalUUID(f.ParentNode)
		eq("parent_node", u)
	}
	if f.ExcludeChildren {
		conds = append(conds, "parent_node IS NULL")
	}
	return conds, args
}

// sortClause validates a sort key and direction against keys and returns
// the ORDER BY expression, the direction and the marker comparison operator.
func sortClause(keys map[string]string, key, dir string) (expr, sqlDir, op string, err error) {
	if key == "" {
		key = "id"
	}
	expr, ok := keys[key]
	if !ok {
		return "", "", "", fmt.Errorf("sort key %q: %w", key, ErrInvalidSortKey)
	}
	switch strings.ToLower(dir) {
	case "", "asc":
		return expr, "ASC", ">", nil
	case "desc":
		return expr, "DESC", "<", nil
	default:
		return "", "", "", fmt.Errorf("sort direction %q: %w", dir, ErrInvalidInput)
	}
}

// pageQuery appends marker, ORDER BY and LIMIT to a SELECT. Rows after the
// marker are those whose (sort expression, id) compares past the marker
// row's: id breaks ties, so pages never skip or repeat. markerFrom is the
// table (with the alias the sort expression uses) the marker row is read
// from; idCol names the id column as the query sees it.
func pageQuery(q string, conds []string, args []any, markerFrom, idCol, expr, sqlDir, op, marker string, limit int) (string, []any) {
	if marker != "" {
		args = append(args, marker)
		if expr == idCol {
			conds = append(conds, fmt.Sprintf("%s %s (SELECT %s FROM %s WHERE uuid = $%d)", idCol, op, idCol, markerFrom, len(args)))
		} else {
			conds = append(conds, fmt.Sprintf("(%s, %s) %s (SELECT %s, %s FROM %s WHERE uuid = $%d)",
				expr, idCol, op, expr, idCol, markerFrom, len(args)))
		}
	}
	if len(conds) > 0 {
		q += " WHERE " + strings.Join(conds, " AND ")
	}
	if expr == idCol {
		q += fmt.Sprintf(" ORDER BY %s %s", idCol, sqlDir)
	} else {
		q += fmt.Sprintf(" ORDER BY %s %s, %s %s", expr, sqlDir, idCol, sqlDir)
	}
	if limit > 0 {
		args = append(args, limit)
		q += fmt.Sprintf(" LIMIT $%d", len(args))
	}
	return q, args
}

// ListNodes returns the nodes that match f, in one query.
func (s *Store) ListNodes(ctx context.Context, f NodeFilter) ([]*Node, error) {
	p, err := nodeTable.page(f.Limit, f.Marker, f.SortKey, f.SortDir)
	if err != nil {
		return nil, err
	}
	cols, fields, err := selectNodeFields(f.Fields)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	conds, args := nodeWhere(f)
	return listPage(ctx, s, p, cols, nodeScanner(fields), conds, args)
}

// checkMarker returns ErrMarkerNotFound when no row of table has the
// marker's uuid. Only an empty page can hide a missing marker (the marker
// condition then matches nothing), so lists call it only then.
func (s *Store) checkMarker(ctx context.Context, table, marker string) error {
	var exists bool
	if err := s.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+table+" WHERE uuid = $1)", marker).Scan(&exists); err != nil {
		return dbError(err, "look up marker %s", marker)
	}
	if !exists {
		return fmt.Errorf("marker %s: %w", marker, ErrMarkerNotFound)
	}
	return nil
}

// CountNodes counts the nodes that match f (Limit, Marker, Sort ignored).
func (s *Store) CountNodes(ctx context.Context, f NodeFilter) (int, error) {
	conds, args := nodeWhere(f)
	q := "SELECT count(*) FROM nodes"
	if len(conds) > 0 {
		q += " WHERE " + strings.Join(conds, " AND ")
	}
	var n int
	if err := s.pool.QueryRow(ctx, q, args...).Scan(&n); err != nil {
		return 0, dbError(err, "count nodes")
	}
	return n, nil
}

// DeleteNode deletes the node and, by cascade, its ports, history, boot
// configuration and inventory.
func (s *Store) DeleteNode(ctx context.Context, uuid string) error {
	return s.deleteByUUID(ctx, "nodes", "node", uuid)
}

// UpdateNode reads the node FOR UPDATE, lets fn change it and writes it back
// in one transaction, setting UpdatedAt (and ProvisionUpdatedAt when the
// provision state changed). ID, UUID, CreatedAt, UpdatedAt and
// ProvisionUpdatedAt are never taken from fn. An error from fn aborts the
// update and is returned unwrapped.
func (s *Store) UpdateNode(ctx context.Context, uuid string, fn func(n *Node) error) (*Node, error) {
	u, _ := canonicalUUID(uuid)
	return updateRow(ctx, s, nodeTable, nodeColumns, scanNode, uuid, "uuid", u, fn, func(tx pgx.Tx, locked Node, n *Node) (*Node, error) {
		return writeNode(ctx, tx, locked, n)
	})
}

// writeNode writes n over the row locked (read FOR UPDATE in tx): UpdateNode's
// write, shared with ApplyInspection.
func writeNode(ctx context.Context, tx pgx.Tx, locked Node, n *Node) (*Node, error) {
	// A node whose instance_uuid goes away loses its allocation with
	// it, as Ironic's update_node and do_node_tear_down destroy it:
	// undeploy (ClearInstanceInfo) and a PATCH removing
	// instance_uuid both come through here.
	if locked.AllocationUUID != nil && locked.InstanceUUID != nil && n.InstanceUUID == nil {
		if err := releaseAllocation(ctx, tx, *locked.AllocationUUID); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return nil, err
		}
	}
	cols, vals := writableNodeValues(n)
	sets := make([]string, len(cols))
	for i, c := range cols {
		sets[i] = fmt.Sprintf("%s = $%d", c, i+1)
	}
	psArg := -1
	for i, c := range cols {
		if c == "provision_state" {
			psArg = i + 1
		}
	}
	vals = append(vals, locked.ID)
	q := fmt.Sprintf(`UPDATE nodes SET %s, updated_at = now(),
		provision_updated_at = CASE WHEN provision_state <> $%d THEN now() ELSE provision_updated_at END
		WHERE id = $%d RETURNING %s`, strings.Join(sets, ", "), psArg, len(vals), nodeColumns)
	rows, _ := tx.Query(ctx, q, vals...)
	return pgx.CollectExactlyOneRow(rows, scanNode)
}

// SetProvisionState moves the node to provision state `to` only if its
// current state is one of from (empty from: any state), in one UPDATE, so
// that of two racing requests exactly one wins. target and lastError are
// written as given (nil clears them); provision_updated_at is set. It
// returns ErrStateConflict (naming the current state) when the node is in
// another state, ErrNotFound when the node does not exist.
func (s *Store) SetProvisionState(ctx context.Context, uuid string, from []provision.State, to provision.State, target *provision.State, lastError *string) (*Node, error) {
	u, _ := canonicalUUID(uuid)
	if from == nil {
		from = []provision.State{}
	}
	rows, _ := s.pool.Query(ctx, `UPDATE nodes SET provision_state = $2, target_provision_state = $3, last_error = $4,
		provision_updated_at = now(), updated_at = now()
		WHERE uuid = $1 AND (cardinality($5::text[]) = 0 OR provision_state = ANY($5::text[]))
		RETURNING `+nodeColumns, u, to, target, lastError, from)
	n, err := pgx.CollectExactlyOneRow(rows, scanNode)
	if err == nil {
		return n, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, dbError(err, "set provision state of node %s to %s", uuid, to)
	}
	return nil, s.notTransitioned(ctx, uuid, to, from)
}

// notTransitioned explains a conditional state change that changed no row:
// ErrNotFound, or ErrStateConflict naming the state the node is in.
func (s *Store) notTransitioned(ctx context.Context, uuid string, to provision.State, from []provision.State) error {
	u, _ := canonicalUUID(uuid)
	var current string
	if err := s.pool.QueryRow(ctx, "SELECT provision_state FROM nodes WHERE uuid = $1", u).Scan(&current); err != nil {
		return dbError(err, "set provision state of node %s to %s", uuid, to)
	}
	return fmt.Errorf("set provision state of node %s to %s: node is in %q, not one of %q: %w",
		uuid, to, current, from, ErrStateConflict)
}

// SetPowerState writes power_state, target_power_state and last_error as
// given (nil clears them).
func (s *Store) SetPowerState(ctx context.Context, uuid string, power *string, targetPower *string, lastError *string) (*Node, error) {
	u, _ := canonicalUUID(uuid)
	rows, _ := s.pool.Query(ctx, `UPDATE nodes SET power_state = $2, target_power_state = $3, last_error = $4, updated_at = now()
		WHERE uuid = $1 RETURNING `+nodeColumns, u, power, targetPower, lastError)
	n, err := pgx.CollectExactlyOneRow(rows, scanNode)
	if err != nil {
		return nil, dbError(err, "set power state of node %s", uuid)
	}
	return n, nil
}

// SetPowerStateMerging records a power state as SetPowerState does with
// no target and no last_error, and merges kv into driver_internal_info in
// the same statement, so that a mark about the power call is written with
// the state the call left (one round trip; the activities' effects.go). It
// reads nothing back.
func (s *Store) SetPowerStateMerging(ctx context.Context, uuid string, power *string, kv map[string]any) error {
	if kv == nil {
		kv = map[string]any{}
	}
	u, _ := canonicalUUID(uuid)
	tag, err := s.pool.Exec(ctx, `UPDATE nodes SET power_state = $2, target_power_state = NULL, last_error = NULL, updated_at = now(),
		driver_internal_info = driver_internal_info || $3::jsonb WHERE uuid = $1`, u, power, kv)
	if err != nil {
		return dbError(err, "set power state of node %s", uuid)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("set power state of node %s: %w", uuid, ErrNotFound)
	}
	return nil
}

// MergeDriverInternalInfo merges keys into driver_internal_info in SQL
// (jsonb ||), so concurrent writers of different keys never lose updates.
func (s *Store) MergeDriverInternalInfo(ctx context.Context, uuid string, kv map[string]any) error {
	return s.updateDriverInternalInfo(ctx, uuid, kv, nil, "merge driver_internal_info")
}

// MergeDriverInternalInfoInState is MergeDriverInternalInfo only while
// the node is in one of states; it reports whether it wrote.
func (s *Store) MergeDriverInternalInfoInState(ctx context.Context, uuid string, kv map[string]any, states []provision.State) (bool, error) {
	u, _ := canonicalUUID(uuid)
	tag, err := s.pool.Exec(ctx, `UPDATE nodes SET driver_internal_info = driver_internal_info || $2::jsonb, updated_at = now()
		WHERE uuid = $1 AND provision_state = ANY($3::text[])`, u, kv, states)
	if err != nil {
		return false, dbError(err, "merge driver_internal_info of node %s", uuid)
	}
	return tag.RowsAffected() == 1, nil
}

// MergeDropDriverInternalInfo merges kv into driver_internal_info and
// removes the keys drop in one statement (one round trip, one row version).
func (s *Store) MergeDropDriverInternalInfo(ctx context.Context, uuid string, kv map[string]any, drop ...string) error {
	return s.updateDriverInternalInfo(ctx, uuid, kv, drop, "update driver_internal_info")
}

// DeleteDriverInternalInfoKeys removes keys from driver_internal_info in SQL.
func (s *Store) DeleteDriverInternalInfoKeys(ctx context.Context, uuid string, keys ...string) error {
	return s.updateDriverInternalInfo(ctx, uuid, nil, keys, "delete driver_internal_info keys")
}

// updateDriverInternalInfo merges kv into driver_internal_info, then removes
// the keys drop, in SQL; what names the change in errors.
func (s *Store) updateDriverInternalInfo(ctx context.Context, uuid string, kv map[string]any, drop []string, what string) error {
	if kv == nil {
		kv = map[string]any{}
	}
	if drop == nil {
		drop = []string{}
	}
	u, _ := canonicalUUID(uuid)
	tag, err := s.pool.Exec(ctx, `UPDATE nodes SET driver_internal_info = (driver_internal_info || $2::jsonb) - $3::text[], updated_at = now()
		WHERE uuid = $1`, u, kv, drop)
	if err != nil {
		return dbError(err, what+" of node %s", uuid)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%s of node %s: %w", what, uuid, ErrNotFound)
	}
	return nil
}

// GetNodeForWork returns the node by UUID with the MAC addresses of its
// PXE-enabled ports, oldest port first, in one query: every workflow
// starts with it.
func (s *Store) GetNodeForWork(ctx context.Context, uuid string) (*Node, []string, error) {
	u, _ := canonicalUUID(uuid)
	n := &Node{}
	var macs []string
	targets := append(nodeTargets(n, nodeFields), &macs)
	err := s.pool.QueryRow(ctx, "SELECT "+nodeColumns+`,
		ARRAY(SELECT p.address FROM ports p WHERE p.node_id = nodes.id AND p.pxe_enabled ORDER BY p.id)
		FROM nodes WHERE uuid = $1`, u).Scan(targets...)
	if err != nil {
		return nil, nil, dbError(err, "get node %s", uuid)
	}
	return n, macs, nil
}
