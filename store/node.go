package store

import (
	"context"
	"time"
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

	ProvisionState       string  `json:"provision_state" db:"provision_state"`
	TargetProvisionState *string `json:"target_provision_state" db:"target_provision_state"`
	PowerState           *string `json:"power_state" db:"power_state"`
	TargetPowerState     *string `json:"target_power_state" db:"target_power_state"`

	Maintenance       bool     `json:"maintenance" db:"maintenance"`
	MaintenanceReason *string  `json:"maintenance_reason" db:"maintenance_reason"`
	Fault             *string  `json:"fault" db:"fault"`
	LastError         *string  `json:"last_error" db:"last_error"`
	Reservation       *string  `json:"reservation" db:"reservation"`
	ConductorGroup    string   `json:"conductor_group" db:"conductor_group"`
	ResourceClass     *string  `json:"resource_class" db:"resource_class"`
	Description       *string  `json:"description" db:"description"`
	Owner             *string  `json:"owner" db:"owner"`
	Lessee            *string  `json:"lessee" db:"lessee"`
	AutomatedClean    *bool    `json:"automated_clean" db:"automated_clean"`
	Protected         bool     `json:"protected" db:"protected"`
	ProtectedReason   *string  `json:"protected_reason" db:"protected_reason"`
	Retired           bool     `json:"retired" db:"retired"`
	RetiredReason     *string  `json:"retired_reason" db:"retired_reason"`
	InstanceUUID      *string  `json:"instance_uuid" db:"instance_uuid"`
	ChassisUUID       *string  `json:"chassis_uuid" db:"chassis_uuid"`
	ConsoleEnabled    bool     `json:"console_enabled" db:"console_enabled"`
	BootMode          *string  `json:"boot_mode" db:"boot_mode"`
	SecureBoot        *bool    `json:"secure_boot" db:"secure_boot"`
	Shard             *string  `json:"shard" db:"shard"`
	Traits            []string `json:"traits" db:"traits"`

	DriverInfo         map[string]any `json:"driver_info" db:"driver_info"`
	DriverInternalInfo map[string]any `json:"driver_internal_info" db:"driver_internal_info"`
	InstanceInfo       map[string]any `json:"instance_info" db:"instance_info"`
	Properties         map[string]any `json:"properties" db:"properties"`
	Extra              map[string]any `json:"extra" db:"extra"`
	CleanStep          map[string]any `json:"clean_step" db:"clean_step"`
	DeployStep         map[string]any `json:"deploy_step" db:"deploy_step"`
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
	ProvisionState string
	Driver         string
	Maintenance    *bool
	ConductorGroup *string // "" is a valid group, hence the pointer
	Associated     *bool   // instance_uuid set
	ResourceClass  string
	Fault          string
	Owner          string
	Lessee         string
	InstanceUUID   string
	Retired        *bool

	// Limit caps the rows returned; 0 means no limit.
	Limit int
	// Marker is a node UUID: only rows after it in the sort order are returned.
	Marker string
	// SortKey is a column name (see SortKeys); default "id".
	SortKey string
	// SortDir is "asc" (default) or "desc".
	SortDir string
}

// CreateNode inserts n, filling UUID when empty and CreatedAt/ID from the
// database. The caller sets ProvisionState (Ironic ≥1.11: "enroll").
func (s *Store) CreateNode(ctx context.Context, n *Node) error { panic("todo") }

// GetNode finds a node by UUID when uuidOrName is a valid UUID, else by name.
func (s *Store) GetNode(ctx context.Context, uuidOrName string) (*Node, error) { panic("todo") }

// ListNodes returns the nodes that match f, in one query.
func (s *Store) ListNodes(ctx context.Context, f NodeFilter) ([]*Node, error) { panic("todo") }

// CountNodes counts the nodes that match f (Limit, Marker, Sort ignored).
func (s *Store) CountNodes(ctx context.Context, f NodeFilter) (int, error) { panic("todo") }

// DeleteNode deletes the node and, by cascade, its ports, history, boot
// configuration and inventory.
func (s *Store) DeleteNode(ctx context.Context, uuid string) error { panic("todo") }

// UpdateNode reads the node FOR UPDATE, lets fn change it and writes it back
// in one transaction, setting UpdatedAt. ID, UUID and CreatedAt are never
// written. An error from fn aborts the update and is returned as is.
func (s *Store) UpdateNode(ctx context.Context, uuid string, fn func(n *Node) error) (*Node, error) {
	panic("todo")
}

// SetProvisionState moves the node to provision state `to` only if its
// current state is one of from (empty from: any state), in one UPDATE.
// target and lastError are written as given (nil clears them). It returns
// ErrStateConflict when the node is in another state, ErrNotFound when the
// node does not exist.
func (s *Store) SetProvisionState(ctx context.Context, uuid string, from []string, to string, target *string, lastError *string) (*Node, error) {
	panic("todo")
}

// SetPowerState writes power_state, target_power_state and last_error as
// given (nil clears them).
func (s *Store) SetPowerState(ctx context.Context, uuid string, power *string, targetPower *string, lastError *string) (*Node, error) {
	panic("todo")
}

// MergeDriverInternalInfo merges keys into driver_internal_info in SQL
// (jsonb ||), so concurrent writers of different keys never lose updates.
func (s *Store) MergeDriverInternalInfo(ctx context.Context, uuid string, kv map[string]any) error {
	panic("todo")
}

// DeleteDriverInternalInfoKeys removes keys from driver_internal_info in SQL.
func (s *Store) DeleteDriverInternalInfoKeys(ctx context.Context, uuid string, keys ...string) error {
	panic("todo")
}
