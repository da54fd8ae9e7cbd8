package bmo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/httpbasic"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/noauth"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/drivers"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/ports"
	"github.com/gophercloud/gophercloud/v2/openstack/utils"
	"github.com/gophercloud/gophercloud/v2/pagination"
)

// Microversions BMO v0.13.2 knows (pkg/provisioner/ironic/clients/features.go):
// it refuses an API below Baseline and sends the highest it knows that
// the API serves.
const (
	Baseline              = 89  // attach and detach virtual media
	VirtualMediaGET       = 93  // GET /v1/nodes/{node}/vmedia
	DisablePowerOffMinor  = 95  // the disable_power_off node field
	HealthMinor           = 109 // the health node field
	DeploymentAbortMinor  = 110 // abort in wait call-back
	softPowerOffTimeout   = 180 // seconds, BMO's softPowerOffTimeout
	bmoRequeueDelay       = 10 * time.Second
	introspectionRequeue  = 15 * time.Second
	forcingDeletionReason = "forcing deletion in baremetal-operator"
)

// ChooseMicroversion is BMO's choice for an API whose maximum is 1.max.
func ChooseMicroversion(max int) string {
	switch {
	case max >= DeploymentAbortMinor:
		return "1.110"
	case max >= HealthMinor:
		return "1.109"
	case max >= DisablePowerOffMinor:
		return "1.95"
	case max >= VirtualMediaGET:
		return "1.93"
	}
	return fmt.Sprintf("1.%d", Baseline)
}

// Config is BMO's Ironic settings (its environment: IRONIC_ENDPOINT, the
// ironic-auth secret, DEPLOY_KERNEL_URL, DEPLOY_RAMDISK_URL, DEPLOY_ISO_URL).
type Config struct {
	// Endpoint is the API's URL with /v1, as BMO's IRONIC_ENDPOINT.
	Endpoint string
	// Username and Password select http_basic; empty: noauth.
	Username, Password string
	// Deploy images BMO sets in driver_info.
	DeployKernelURL, DeployRamdiskURL, DeployISOURL string
	// RequeueDelay replaces BMO's 10 s requeue delays (15 s for
	// inspection): 0 keeps them.
	RequeueDelay time.Duration
	// Transport carries every request (a Recorder in tests).
	Transport http.RoundTripper
}

// Image is a BareMetalHost's spec.image.
type Image struct {
	URL, Checksum string
	// ChecksumType is md5, sha256, sha512, auto or "".
	ChecksumType string
	// DiskFormat is raw, qcow2, ... or "" (not sent).
	DiskFormat string
}

// Host is what BMO's provisioner knows of a BareMetalHost.
type Host struct {
	Namespace, Name, UID                 string
	BMCAddress, BMCUsername, BMCPassword string
	BootMACAddress                       string
	// BootMode is UEFI (default), UEFISecureBoot or legacy.
	BootMode        string
	CPUArchitecture string
	DisablePowerOff bool
	// AutomatedCleaningMode is metadata (default) or disabled.
	AutomatedCleaningMode string
	// PreprovisioningNetworkData is set as the node's network_data.
	PreprovisioningNetworkData map[string]any
	Image                      Image
	// CustomDeployMethod is spec.customDeploy.method: the node is created
	// with deploy_interface custom-agent and provisioned with that deploy
	// step (BMO's customDeploy).
	CustomDeployMethod string
	// RootDeviceName is rootDeviceHints.deviceName.
	RootDeviceName string
	// UserData, NetworkData and MetaData are the config drive's parts.
	UserData    string
	NetworkData map[string]any
	MetaData    map[string]any
	// ProvisioningID is status.provisioning.ID: the node's UUID once
	// registered (Register sets it, as the controller does).
	ProvisioningID string
}

func (h *Host) nodeName() string { return h.Namespace + "~" + h.Name }

// Result is a provisioner method's answer to the controller.
type Result struct {
	Dirty        bool
	RequeueAfter time.Duration
	ErrorMessage string
}

// Provisioner is BMO's ironicProvisioner for one host.
type Provisioner struct {
	cfg    Config
	client *gophercloud.ServiceClient
	host   *Host
	access *AccessDetails
	// MaxVersion is the API's maximum minor version (TryInit).
	MaxVersion int
}

// New builds the provisioner of host, as BMO's factory: a client on the
// endpoint (noauth or http_basic) at the baseline microversion.
func New(cfg Config, host *Host) (*Provisioner, error) {
	var c *gophercloud.ServiceClient
	var err error
	if cfg.Username != "" {
		c, err = httpbasic.NewBareMetalHTTPBasic(httpbasic.EndpointOpts{IronicEndpoint: cfg.Endpoint, IronicUser: cfg.Username, IronicUserPassword: cfg.Password})
	} else {
		c, err = noauth.NewBareMetalNoAuth(noauth.EndpointOpts{IronicEndpoint: cfg.Endpoint})
	}
	if err != nil {
		return nil, err
	}
	c.Microversion = fmt.Sprintf("1.%d", Baseline)
	if cfg.Transport != nil {
		c.HTTPClient = http.Client{Transport: cfg.Transport}
	}
	access, err := ParseBMCAddress(host.BMCAddress)
	if err != nil {
		return nil, err
	}
	return &Provisioner{cfg: cfg, client: c, host: host, access: access}, nil
}

// Microversion is the version the client sends now.
func (p *Provisioner) Microversion() string { return p.client.Microversion }

func (p *Provisioner) delay(d time.Duration) time.Duration {
	if p.cfg.RequeueDelay == 0 || d == 0 {
		return d
	}
	return p.cfg.RequeueDelay
}

func (p *Provisioner) continuing(d time.Duration) (Result, error) {
	return Result{Dirty: true, RequeueAfter: p.delay(d)}, nil
}

func (p *Provisioner) retryAfter(d time.Duration) (Result, error) {
	return Result{Dirty: true, RequeueAfter: p.delay(d)}, nil
}

func (p *Provisioner) failed(msg string) (Result, error) {
	return Result{RequeueAfter: p.delay(bmoRequeueDelay), ErrorMessage: msg}, nil
}

func complete() (Result, error) { return Result{}, nil }

// FailedError is a Result with an ErrorMessage: BMO puts the host in an
// error state with that message.
type FailedError struct{ Message string }

func (e *FailedError) Error() string { return "operation failed: " + e.Message }

// Run calls step as BMO's controller would, again after each Dirty
// result's RequeueAfter, until it completes; a transient error (BMO would
// retry for ever) or a failure ends it.
func Run(ctx context.Context, step func(context.Context) (Result, error)) error {
	for {
		r, err := step(ctx)
		if err != nil {
			return err
		}
		if r.ErrorMessage != "" {
			return &FailedError{r.ErrorMessage}
		}
		if !r.Dirty {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("still not done: %w", ctx.Err())
		case <-time.After(r.RequeueAfter):
		}
	}
}

// StatusOf is the HTTP status of a gophercloud error (0 if none).
func StatusOf(err error) int {
	var e gophercloud.ErrUnexpectedResponseCode
	if errors.As(err, &e) {
		return e.Actual
	}
	return 0
}

// TryInit is BMO's TryInit: version discovery (GET /v1/ without a version
// header), the baseline check, the choice of microversion, then the
// drivers list (ready when it has one).
func (p *Provisioner) TryInit(ctx context.Context) (bool, error) {
	mvs, err := utils.GetSupportedMicroversions(ctx, p.client)
	if err != nil {
		return false, err
	}
	if mvs.MaxMajor != 1 || mvs.MaxMinor < Baseline {
		return false, fmt.Errorf("ironic API 1.%d or newer is required, got %d.%d", Baseline, mvs.MaxMajor, mvs.MaxMinor)
	}
	p.MaxVersion = mvs.MaxMinor
	p.client.Microversion = ChooseMicroversion(mvs.MaxMinor)
	count := 0
	err = drivers.ListDrivers(p.client, drivers.ListDriversOpts{}).EachPage(ctx, func(_ context.Context, page pagination.Page) (bool, error) {
		d, err := drivers.ExtractDrivers(page)
		count += len(d)
		return err == nil, err
	})
	return count > 0, err
}

// getNode reads the node by its provisioning ID; nil, nil when the host
// needs registration (no ID, or 404).
func (p *Provisioner) getNode(ctx context.Context) (*nodes.Node, error) {
	if p.host.ProvisioningID == "" {
		return nil, nil
	}
	n, err := nodes.Get(ctx, p.client, p.host.ProvisioningID).Extract()
	if err == nil {
		return n, nil
	}
	if gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
		return nil, nil
	}
	return nil, fmt.Errorf("failed to find node by ID %s: %w", p.host.ProvisioningID, err)
}

var errNeedsRegistration = errors.New("host not registered")

func (p *Provisioner) mustGetNode(ctx context.Context) (*nodes.Node, error) {
	n, err := p.getNode(ctx)
	if err == nil && n == nil {
		err = errNeedsRegistration
	}
	return n, err
}

func (p *Provisioner) listPorts(ctx context.Context, opts ports.ListOpts) ([]ports.Port, error) {
	opts.Fields = []string{"node_uuid"}
	pages, err := ports.List(p.client, opts).AllPages(ctx)
	if err != nil {
		return nil, err
	}
	return ports.ExtractPorts(pages)
}

// MACConflictError: the boot MAC belongs to a port of another named node.
type MACConflictError struct{ Address, Node string }

func (e *MACConflictError) Error() string {
	return fmt.Sprintf("MAC address %s conflicts with existing node %s", e.Address, e.Node)
}

// findExistingHost looks the node up by provisioning ID, then by name
// (namespace~name, then the bare name when it has no ~), then by the
// boot MAC's port.
func (p *Provisioner) findExistingHost(ctx context.Context) (*nodes.Node, error) {
	if n, err := p.getNode(ctx); n != nil || err != nil {
		return n, err
	}
	names := []string{p.host.nodeName()}
	if !strings.Contains(p.host.Name, "~") {
		names = append(names, p.host.Name)
	}
	for _, name := range names {
		n, err := nodes.Get(ctx, p.client, name).Extract()
		if err == nil {
			return n, nil
		}
		if !gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
			return nil, fmt.Errorf("failed to find node by name %s: %w", name, err)
		}
	}
	if mac := p.host.BootMACAddress; mac != "" {
		all, err := p.listPorts(ctx, ports.ListOpts{Address: mac})
		if err != nil {
			return nil, nil
		}
		if len(all) > 0 {
			n, err := nodes.Get(ctx, p.client, all[0].NodeUUID).Extract()
			if err != nil {
				return nil, fmt.Errorf("port %s exists but failed to find linked node %s by ID: %w", mac, all[0].NodeUUID, err)
			}
			if n.Name != "" {
				return nil, &MACConflictError{mac, n.Name}
			}
			return n, nil
		}
	}
	return nil, nil
}

func (p *Provisioner) createPort(ctx context.Context, nodeUUID string) error {
	enable := true
	_, err := ports.Create(ctx, p.client, ports.CreateOpts{NodeUUID: nodeUUID, Address: p.host.BootMACAddress, PXEEnabled: &enable}).Extract()
	if err != nil {
		return fmt.Errorf("failed to create ironic port for node %s, MAC: %s: %w", nodeUUID, p.host.BootMACAddress, err)
	}
	return nil
}

func (p *Provisioner) ensurePort(ctx context.Context, n *nodes.Node) error {
	pages, err := ports.List(p.client, ports.ListOpts{Fields: []string{"node_uuid"}, NodeUUID: n.UUID}).AllPages(ctx)
	if err != nil {
		return fmt.Errorf("failed to page over list of ports: %w", err)
	}
	if empty, err := pages.IsEmpty(); err != nil || !empty {
		return err
	}
	all, err := p.listPorts(ctx, ports.ListOpts{Address: p.host.BootMACAddress})
	if err != nil {
		return fmt.Errorf("failed to list ports for %s: %w", p.host.BootMACAddress, err)
	}
	if len(all) == 0 {
		return p.createPort(ctx, n.UUID)
	}
	return nil
}

var bootModeCapabilities = map[string]string{
	"UEFI":           "boot_mode:uefi",
	"UEFISecureBoot": "boot_mode:uefi,secure_boot:true",
	"legacy":         "boot_mode:bios",
}

func (p *Provisioner) bootMode() string {
	if p.host.BootMode == "" {
		return "UEFI"
	}
	return p.host.BootMode
}

// capabilities keeps the node's capabilities but boot_mode and
// secure_boot, then adds the host's boot mode (BMO's
// buildCapabilitiesValue).
func (p *Provisioner) capabilities(n *nodes.Node) string {
	want := bootModeCapabilities[p.bootMode()]
	if n == nil {
		return want
	}
	cur, _ := n.Properties["capabilities"].(string)
	if cur == "" {
		return want
	}
	var kept []string
	for _, item := range strings.Split(cur, ",") {
		if !strings.HasPrefix(item, "boot_mode:") && !strings.HasPrefix(item, "secure_boot:") {
			kept = append(kept, item)
		}
	}
	return strings.Join(append(kept, want), ",")
}

// Register is BMO's Register: find or enrol the node, bring its settings
// in line, move it to manageable and configure it.
func (p *Provisioner) Register(ctx context.Context, credentialsChanged bool) (Result, error) {
	if p.host.DisablePowerOff && p.MaxVersion < DisablePowerOffMinor {
		return p.failed("current ironic version does not support DisablePowerOff, refusing to manage node")
	}
	n, err := p.findExistingHost(ctx)
	if err != nil {
		var conflict *MACConflictError
		if errors.As(err, &conflict) {
			return p.failed(conflict.Error())
		}
		return Result{}, fmt.Errorf("failed to find existing host: %w", err)
	}
	if p.access.NeedsMAC && p.host.BootMACAddress == "" {
		return p.failed(fmt.Sprintf("BMC driver %s requires a BootMACAddress value", p.access.Driver))
	}
	driverInfo := p.access.DriverInfo(p.host.BMCUsername, p.host.BMCPassword)
	u := &updater{}
	if n == nil {
		dpo := p.host.DisablePowerOff
		opts := nodes.CreateOpts{
			Driver: p.access.Driver, BIOSInterface: p.access.BIOSInterface, BootInterface: p.access.BootInterface,
			Name: p.host.nodeName(), DriverInfo: driverInfo, FirmwareInterface: p.access.FirmwareInterface,
			InspectInterface: "agent", ManagementInterface: p.access.ManagementInterface, PowerInterface: p.access.PowerInterface,
			RAIDInterface: p.access.RAIDInterface, VendorInterface: p.access.VendorInterface,
			// BMO sets disable_power_off in every create, whatever the
			// microversion (enrollNode: DisablePowerOff: &data.DisablePowerOff).
			DisablePowerOff: &dpo,
			DeployInterface: p.deployInterface(),
			Properties:      map[string]any{"capabilities": p.capabilities(nil), "cpu_arch": p.host.CPUArchitecture},
		}
		n, err = nodes.Create(ctx, p.client, opts).Extract()
		if gophercloud.ResponseCodeIs(err, http.StatusConflict) {
			return p.retryAfter(bmoRequeueDelay)
		}
		if err != nil {
			return Result{}, fmt.Errorf("failed to register host in ironic: %w", err)
		}
		if p.host.BootMACAddress != "" {
			if err := p.createPort(ctx, n.UUID); err != nil {
				return Result{}, err
			}
		}
		p.host.ProvisioningID = n.UUID
	} else {
		p.host.ProvisioningID = n.UUID
		u.top("name", p.host.nodeName(), n.Name)
		if p.host.BootMACAddress != "" {
			if err := p.ensurePort(ctx, n); err != nil {
				return Result{}, err
			}
		}
		if credentialsChanged || !bmcAddressMatches(n, driverInfo) {
			u.top("driver_info", driverInfo, n.DriverInfo)
		}
		u.top("disable_power_off", p.host.DisablePowerOff, n.DisablePowerOff)
		if p.host.CPUArchitecture != "" {
			u.section("/properties", n.Properties, map[string]any{"cpu_arch": p.host.CPUArchitecture})
		}
	}
	if p.host.PreprovisioningNetworkData != nil {
		u.top("network_data", p.host.PreprovisioningNetworkData, n.NetworkData)
	}
	if n, err = p.update(ctx, n, u); err != nil || n == nil {
		return p.updateResult(err)
	}
	switch nodes.ProvisionState(n.ProvisionState) {
	case nodes.Enroll:
		if n.LastError != "" && !credentialsChanged {
			return p.failed(n.LastError)
		}
		if n.TargetProvisionState == string(nodes.TargetManage) {
			return p.continuing(bmoRequeueDelay)
		}
		return p.changeProvisionState(ctx, n, nodes.ProvisionStateOpts{Target: nodes.TargetManage})
	case nodes.Verifying:
		return p.continuing(bmoRequeueDelay)
	case nodes.CleanWait, nodes.Cleaning, nodes.DeployWait, nodes.Deploying, nodes.Inspecting:
		return complete()
	}
	return p.configureNode(ctx, n)
}

func bmcAddressMatches(n *nodes.Node, driverInfo map[string]any) bool {
	pick := func(m map[string]any) map[string]any {
		out := map[string]any{}
		for k, v := range m {
			if strings.HasSuffix(k, "_address") {
				out[k] = v
				break
			}
		}
		return out
	}
	return reflect.DeepEqual(pick(n.DriverInfo), pick(driverInfo))
}

// configureNode sets the deploy images, automated_clean and the
// capabilities and cpu_arch properties (BMO's configureNode).
func (p *Provisioner) configureNode(ctx context.Context, n *nodes.Node) (Result, error) {
	u := &updater{}
	if info := p.deployImage(); info != nil {
		u.section("/driver_info", n.DriverInfo, info)
	}
	u.top("automated_clean", p.host.AutomatedCleaningMode != "disabled", n.AutomatedClean)
	p.properties(u, n)
	if n, err := p.update(ctx, n, u); err != nil || n == nil {
		return p.updateResult(err)
	}
	return complete()
}

// properties brings the capabilities (boot mode) and cpu_arch properties
// in line, as BMO does at configuration and before inspection.
func (p *Provisioner) properties(u *updater, n *nodes.Node) {
	props := map[string]any{"capabilities": p.capabilities(n)}
	if p.host.CPUArchitecture != "" {
		props["cpu_arch"] = p.host.CPUArchitecture
	}
	u.section("/properties", n.Properties, props)
}

// deployImage is BMO's setDeployImage without a preprovisioning image
// builder: the deploy ISO for a virtual media driver when set, else the
// kernel and ramdisk when both are set; the other keys are removed.
func (p *Provisioner) deployImage() map[string]any {
	info := map[string]any{"deploy_kernel": nil, "deploy_ramdisk": nil, "deploy_iso": nil, "kernel_append_params": nil}
	if p.access.ISOImages && p.cfg.DeployISOURL != "" {
		info["deploy_iso"] = p.cfg.DeployISOURL
		return info
	}
	if p.cfg.DeployKernelURL != "" && p.cfg.DeployRamdiskURL != "" {
		info["deploy_kernel"], info["deploy_ramdisk"] = p.cfg.DeployKernelURL, p.cfg.DeployRamdiskURL
		return info
	}
	return nil
}

// errConflict marks a 409 on a write: BMO retries after its delay.
var errConflict = errors.New("busy")

// update sends the updater's operations, if any, and returns the node as
// the API answered (or n unchanged).
func (p *Provisioner) update(ctx context.Context, n *nodes.Node, u *updater) (*nodes.Node, error) {
	if len(u.ops) == 0 {
		return n, nil
	}
	got, err := nodes.Update(ctx, p.client, n.UUID, u.ops).Extract()
	if gophercloud.ResponseCodeIs(err, http.StatusConflict) {
		return nil, errConflict
	}
	if err != nil {
		return nil, fmt.Errorf("failed to update host settings in ironic: %w", err)
	}
	return got, nil
}

func (p *Provisioner) updateResult(err error) (Result, error) {
	if errors.Is(err, errConflict) {
		return p.retryAfter(bmoRequeueDelay)
	}
	return Result{}, err
}

// changeProvisionState is BMO's tryChangeNodeProvisionState: it waits
// out a fault, clears maintenance first, retries a 409 after its delay.
func (p *Provisioner) changeProvisionState(ctx context.Context, n *nodes.Node, opts nodes.ProvisionStateOpts) (Result, error) {
	_, r, err := p.tryChangeProvisionState(ctx, n, opts)
	return r, err
}

// tryChangeProvisionState is BMO's tryChangeNodeProvisionState: success
// says the API took the change.
func (p *Provisioner) tryChangeProvisionState(ctx context.Context, n *nodes.Node, opts nodes.ProvisionStateOpts) (bool, Result, error) {
	if n.Fault != "" {
		r, err := p.retryAfter(bmoRequeueDelay)
		return false, r, err
	}
	if n.Maintenance {
		r, err := p.setMaintenance(ctx, n, false, "")
		return false, r, err
	}
	err := nodes.ChangeProvisionState(ctx, p.client, n.UUID, opts).ExtractErr()
	if gophercloud.ResponseCodeIs(err, http.StatusConflict) {
		r, err := p.retryAfter(bmoRequeueDelay)
		return false, r, err
	}
	if err != nil {
		return false, Result{}, fmt.Errorf("failed to change provisioning state to %q: %w", opts.Target, err)
	}
	r, err := p.continuing(bmoRequeueDelay)
	return true, r, err
}

func (p *Provisioner) setMaintenance(ctx context.Context, n *nodes.Node, on bool, reason string) (Result, error) {
	var err error
	if on {
		err = nodes.SetMaintenance(ctx, p.client, n.UUID, nodes.MaintenanceOpts{Reason: reason}).ExtractErr()
	} else {
		err = nodes.UnsetMaintenance(ctx, p.client, n.UUID).ExtractErr()
	}
	if gophercloud.ResponseCodeIs(err, http.StatusConflict) {
		return p.retryAfter(bmoRequeueDelay)
	}
	if err != nil {
		return Result{}, fmt.Errorf("failed to set host maintenance flag to %v (%w)", on, err)
	}
	return p.continuing(0)
}

// FirmwareSetting is one BIOS setting with its schema.
type FirmwareSetting struct {
	Value, AttributeType string
	AllowableValues      []string
	ReadOnly             bool
}

// GetFirmwareSettings is BMO's: GET .../bios (?detail=true with the schema).
func (p *Provisioner) GetFirmwareSettings(ctx context.Context, includeSchema bool) (map[string]FirmwareSetting, error) {
	n, err := p.mustGetNode(ctx)
	if err != nil {
		return nil, fmt.Errorf("could not get node for BIOS settings: %w", err)
	}
	var opts nodes.ListBIOSSettingsOptsBuilder
	if includeSchema {
		opts = nodes.ListBIOSSettingsOpts{Detail: true}
	}
	list, err := nodes.ListBIOSSettings(ctx, p.client, n.UUID, opts).Extract()
	if err != nil {
		return nil, fmt.Errorf("could not get BIOS settings for node %s: %w", n.UUID, err)
	}
	out := map[string]FirmwareSetting{}
	for _, s := range list {
		out[s.Name] = FirmwareSetting{Value: s.Value, AttributeType: s.AttributeType, AllowableValues: s.AllowableValues, ReadOnly: s.ReadOnly != nil && *s.ReadOnly}
	}
	return out, nil
}

// ErrFirmwareUpdateUnsupported: the node's firmware_interface is no-firmware.
var ErrFirmwareUpdateUnsupported = errors.New("firmware update is not supported")

// FirmwareComponent is one of the node's bios, bmc and nic* components.
type FirmwareComponent struct {
	Component, InitialVersion, CurrentVersion, LastVersionFlashed string
	UpdatedAt                                                     *time.Time
}

// GetFirmwareComponents is BMO's: GET .../firmware unless no-firmware,
// keeping bios, bmc and nic* components.
func (p *Provisioner) GetFirmwareComponents(ctx context.Context) ([]FirmwareComponent, error) {
	n, err := p.mustGetNode(ctx)
	if err != nil {
		return nil, fmt.Errorf("could not get node to retrieve firmware components: %w", err)
	}
	if n.FirmwareInterface == "no-firmware" {
		return nil, ErrFirmwareUpdateUnsupported
	}
	list, err := nodes.ListFirmware(ctx, p.client, n.UUID).Extract()
	if err != nil {
		return nil, fmt.Errorf("could not get firmware components for node %s: %w", n.UUID, err)
	}
	var out []FirmwareComponent
	for _, c := range list {
		if c.Component != "bios" && c.Component != "bmc" && !strings.HasPrefix(c.Component, "nic:") {
			continue
		}
		out = append(out, FirmwareComponent{Component: c.Component, InitialVersion: c.InitialVersion,
			CurrentVersion: c.CurrentVersion, LastVersionFlashed: c.LastVersionFlashed, UpdatedAt: c.UpdatedAt})
	}
	return out, nil
}

// HasCapacity is BMO's busy-host check: a virtual media host is never
// limited; others list the nodes (uuid, name, provision_state,
// boot_interface) and count the busy ones against maxBusy.
func (p *Provisioner) HasCapacity(ctx context.Context, maxBusy int) (bool, error) {
	if p.access.ISOImages {
		return true, nil
	}
	pages, err := nodes.List(p.client, nodes.ListOpts{Fields: []string{"uuid,name,provision_state,boot_interface"}}).AllPages(ctx)
	if err != nil {
		return false, err
	}
	all, err := nodes.ExtractNodes(pages)
	if err != nil {
		return false, err
	}
	busy := map[string]bool{}
	for _, n := range all {
		switch nodes.ProvisionState(n.ProvisionState) {
		case nodes.Cleaning, nodes.CleanWait, nodes.Inspecting, nodes.InspectWait, nodes.Deploying, nodes.DeployWait, nodes.Deleting:
			if !strings.Contains(n.BootInterface, "virtual-media") {
				busy[n.Name] = true
			}
		}
	}
	return busy[p.host.nodeName()] || len(busy) < maxBusy, nil
}

func (p *Provisioner) startInspection(ctx context.Context, n *nodes.Node) (Result, error) {
	u := &updater{}
	p.properties(u, n)
	if n, err := p.update(ctx, n, u); err != nil || n == nil {
		return p.updateResult(err)
	}
	return p.changeProvisionState(ctx, n, nodes.ProvisionStateOpts{Target: nodes.TargetInspect})
}

// InspectHardware is BMO's: from manageable, the inventory (404: never
// inspected → start inspection), wait through inspecting and inspect
// wait, then the inventory → hardware details.
func (p *Provisioner) InspectHardware(ctx context.Context, refresh bool) (Result, *HardwareDetails, error) {
	n, err := p.mustGetNode(ctx)
	if err != nil {
		return Result{}, nil, err
	}
	switch nodes.ProvisionState(n.ProvisionState) {
	case nodes.Available:
		r, err := p.changeProvisionState(ctx, n, nodes.ProvisionStateOpts{Target: nodes.TargetManage})
		return r, nil, err
	case nodes.InspectWait, nodes.Inspecting:
		r, err := p.continuing(introspectionRequeue)
		return r, nil, err
	case nodes.InspectFail:
		msg := n.LastError
		if msg == "" {
			msg = "Inspection failed"
		}
		r, err := p.failed(msg)
		return r, nil, err
	case nodes.Manageable:
		if refresh {
			r, err := p.startInspection(ctx, n)
			return r, nil, err
		}
	default:
		return Result{}, nil, fmt.Errorf("unexpected provision state %s", n.ProvisionState)
	}
	data, err := nodes.GetInventory(ctx, p.client, n.UUID).Extract()
	if gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
		r, err := p.startInspection(ctx, n)
		return r, nil, err
	}
	if err != nil {
		return Result{}, nil, fmt.Errorf("failed to retrieve hardware introspection data: %w", err)
	}
	return Result{}, hardwareDetails(data), nil
}

// PrepareData is the part of BMO's provisioner.PrepareData this client
// models: the host's RAID (target and what the host has), its firmware
// settings (target and actual, by name) and firmware updates.
type PrepareData struct {
	TargetRAIDConfig, ActualRAIDConfig *RAIDConfig
	TargetFirmwareSettings             map[string]string
	ActualFirmwareSettings             map[string]string
	TargetFirmwareComponents           []FirmwareUpdate
}

// RAIDConfig is BMO's RAIDConfig.
type RAIDConfig struct {
	HardwareRAIDVolumes []HardwareRAIDVolume
	SoftwareRAIDVolumes []SoftwareRAIDVolume
}

// HardwareRAIDVolume is BMO's HardwareRAIDVolume.
type HardwareRAIDVolume struct {
	SizeGibibytes         *int
	Level, Name           string
	Rotational            *bool
	NumberOfPhysicalDisks *int
	Controller            string
	PhysicalDisks         []string
}

// SoftwareRAIDVolume is BMO's SoftwareRAIDVolume; PhysicalDisks are
// device names (BMO's root device hints, deviceName only).
type SoftwareRAIDVolume struct {
	SizeGibibytes *int
	Level         string
	PhysicalDisks []string
}

// FirmwareUpdate is BMO's FirmwareUpdate.
type FirmwareUpdate struct{ Component, URL string }

// Prepare is BMO's Prepare: with unprepared, a host whose RAID, firmware
// settings or firmware components differ goes from available back to
// manageable, then (in manageable) gets its RAID interface and target
// RAID configuration and a manual clean with BMO's steps; it waits
// through cleaning; a failed clean with restartOnFailure goes back to
// manageable (out of maintenance first). started says a manual clean was
// started, or that there was nothing to do (BMO then records the host as
// prepared and calls again with unprepared false).
func (p *Provisioner) Prepare(ctx context.Context, data PrepareData, unprepared, restartOnFailure bool) (Result, bool, error) {
	access, err := ParseBMCAddress(p.host.BMCAddress)
	if err != nil {
		return Result{}, false, err
	}
	n, err := p.mustGetNode(ctx)
	if err != nil {
		return Result{}, false, err
	}
	done := func(r Result, err error) (Result, bool, error) { return r, false, err }
	switch nodes.ProvisionState(n.ProvisionState) {
	case nodes.Available:
		if unprepared {
			steps, err := p.manualCleaningSteps(access, data)
			if err != nil {
				return done(p.failed(err.Error()))
			}
			if len(steps) != 0 {
				return done(p.changeProvisionState(ctx, n, nodes.ProvisionStateOpts{Target: nodes.TargetManage}))
			}
			r, err := complete()
			return r, true, err // nothing to do
		}
		return done(complete())
	case nodes.Manageable:
		if unprepared {
			if r, err := p.setTargetRAID(ctx, access, n, data); err != nil || r.Dirty || r.ErrorMessage != "" {
				return r, false, err
			}
			steps, err := p.manualCleaningSteps(access, data)
			if err != nil {
				return done(p.failed(err.Error()))
			}
			if len(steps) != 0 {
				return p.tryChangeProvisionStateStarted(ctx, n, nodes.ProvisionStateOpts{Target: nodes.TargetClean, CleanSteps: steps})
			}
			r, err := complete()
			return r, true, err // nothing to do
		}
		return done(complete())
	case nodes.CleanFail:
		if !restartOnFailure {
			return done(p.failed(n.LastError))
		}
		if n.Maintenance {
			return done(p.setMaintenance(ctx, n, false, ""))
		}
		return done(p.changeProvisionState(ctx, n, nodes.ProvisionStateOpts{Target: nodes.TargetManage}))
	case nodes.Cleaning, nodes.CleanWait:
		return done(p.continuing(bmoRequeueDelay))
	}
	return Result{}, false, fmt.Errorf("have unexpected ironic node state %s", n.ProvisionState)
}

// tryChangeProvisionStateStarted is tryChangeProvisionState with Prepare's
// result order.
func (p *Provisioner) tryChangeProvisionStateStarted(ctx context.Context, n *nodes.Node, opts nodes.ProvisionStateOpts) (Result, bool, error) {
	started, r, err := p.tryChangeProvisionState(ctx, n, opts)
	return r, started, err
}

// raidInterface is BMO's CheckRAIDInterface: software volumes (wanted or
// present) need the agent's RAID interface; hardware volumes a driver
// with one.
func raidInterface(current string, target, actual *RAIDConfig) (string, error) {
	if target == nil {
		return current, nil
	}
	if current == "no-raid" && len(target.HardwareRAIDVolumes) != 0 {
		return "", fmt.Errorf("RAID settings are defined, but the node's driver %s does not support RAID", current)
	}
	if current == "agent" && len(target.HardwareRAIDVolumes) != 0 {
		return "", fmt.Errorf("hardware RAID settings are defined, but the node's driver %s only supports software RAID", current)
	}
	if len(target.SoftwareRAIDVolumes) != 0 || (actual != nil && len(actual.SoftwareRAIDVolumes) != 0) {
		return "agent", nil
	}
	return current, nil
}

// setTargetRAID is BMO's setTargetRAIDCfg: the RAID interface patched if
// it changes, then PUT states/raid with the logical disks (the first the
// root volume: this client's hosts have no root device hints with RAID).
func (p *Provisioner) setTargetRAID(ctx context.Context, access *AccessDetails, n *nodes.Node, data PrepareData) (Result, error) {
	iface, err := raidInterface(access.RAIDInterface, data.TargetRAIDConfig, data.ActualRAIDConfig)
	if err != nil {
		return p.failed(err.Error())
	}
	if iface == "" {
		// This client's fake:// kind leaves the interface to the driver's
		// default (BMO's kinds always name one): nothing to patch.
		iface = n.RAIDInterface
	}
	disks, err := logicalDisks(data.TargetRAIDConfig)
	if err != nil {
		return p.failed(err.Error())
	}
	if len(disks) == 0 {
		return Result{}, nil
	}
	if p.host.RootDeviceName == "" {
		disks[0].IsRootVolume = new(bool)
		*disks[0].IsRootVolume = true
	}
	u := &updater{}
	u.top("raid_interface", iface, n.RAIDInterface)
	if n, err = p.update(ctx, n, u); err != nil {
		return p.updateResult(err)
	}
	if err := nodes.SetRAIDConfig(ctx, p.client, n.UUID, nodes.RAIDConfigOpts{LogicalDisks: disks}).ExtractErr(); err != nil {
		return Result{}, err
	}
	return Result{}, nil
}

// logicalDisks is BMO's BuildTargetRAIDCfg (without the root volume).
func logicalDisks(raid *RAIDConfig) ([]nodes.LogicalDisk, error) {
	if raid == nil {
		return nil, nil
	}
	var out []nodes.LogicalDisk
	if len(raid.HardwareRAIDVolumes) != 0 {
		names := map[string]int{}
		for i, v := range raid.HardwareRAIDVolumes {
			if v.Name != "" {
				if j, dup := names[v.Name]; dup {
					return nil, fmt.Errorf("the names(%s) of volume[%d] and volume[%d] are repeated", v.Name, i, j)
				}
				names[v.Name] = i
			}
			if len(v.PhysicalDisks) != 0 && v.Controller == "" {
				return nil, errors.New("'controller' must be specified if 'physicalDisks' are used")
			}
			d := nodes.LogicalDisk{SizeGB: v.SizeGibibytes, RAIDLevel: nodes.RAIDLevel(v.Level), VolumeName: v.Name, Controller: v.Controller}
			for _, pd := range v.PhysicalDisks {
				d.PhysicalDisks = append(d.PhysicalDisks, pd)
			}
			if v.Rotational != nil {
				d.DiskType = nodes.SSD
				if *v.Rotational {
					d.DiskType = nodes.HDD
				}
			}
			if v.NumberOfPhysicalDisks != nil {
				d.NumberOfPhysicalDisks = *v.NumberOfPhysicalDisks
			}
			out = append(out, d)
		}
		return out, nil
	}
	if len(raid.SoftwareRAIDVolumes) != 0 {
		if nodes.RAIDLevel(raid.SoftwareRAIDVolumes[0].Level) != nodes.RAID1 {
			return nil, errors.New("the level in first volume of software raid must be RAID1")
		}
		for _, v := range raid.SoftwareRAIDVolumes {
			d := nodes.LogicalDisk{SizeGB: v.SizeGibibytes, RAIDLevel: nodes.RAIDLevel(v.Level), Controller: "software"}
			for _, name := range v.PhysicalDisks {
				d.PhysicalDisks = append(d.PhysicalDisks, map[string]any{"name": "s== " + name})
			}
			out = append(out, d)
		}
	}
	return out, nil
}

// manualCleaningSteps is BMO's buildManualCleaningSteps: RAID steps, then
// bios.apply_configuration with the settings that differ, then
// firmware.update with the components.
func (p *Provisioner) manualCleaningSteps(access *AccessDetails, data PrepareData) ([]nodes.CleanStep, error) {
	steps, err := raidCleanSteps(access.RAIDInterface, data.TargetRAIDConfig, data.ActualRAIDConfig)
	if err != nil {
		return nil, err
	}
	var settings []map[string]any
	names := make([]string, 0, len(data.TargetFirmwareSettings))
	for k := range data.TargetFirmwareSettings {
		names = append(names, k)
	}
	sort.Strings(names) // BMO ranges over a map; the order is not part of the contract
	for _, k := range names {
		if v := data.TargetFirmwareSettings[k]; data.ActualFirmwareSettings == nil || data.ActualFirmwareSettings[k] != v {
			settings = append(settings, map[string]any{"name": k, "value": v})
		}
	}
	if data.ActualFirmwareSettings == nil {
		settings = nil // BMO then sends only the BMC driver's own settings (none here)
	}
	if len(settings) != 0 {
		steps = append(steps, nodes.CleanStep{Interface: nodes.InterfaceBIOS, Step: "apply_configuration", Args: map[string]any{"settings": settings}})
	}
	var updates []map[string]string
	for _, u := range data.TargetFirmwareComponents {
		updates = append(updates, map[string]string{"component": u.Component, "url": u.URL})
	}
	if len(updates) != 0 {
		steps = append(steps, nodes.CleanStep{Interface: nodes.InterfaceFirmware, Step: "update", Args: map[string]any{"settings": updates}})
	}
	return steps, nil
}

// raidCleanSteps is BMO's BuildRAIDCleanSteps.
func raidCleanSteps(iface string, target, actual *RAIDConfig) ([]nodes.CleanStep, error) {
	if _, err := raidInterface(iface, target, actual); err != nil {
		return nil, err
	}
	if target != nil && target.SoftwareRAIDVolumes != nil {
		if actual != nil && reflect.DeepEqual(target.SoftwareRAIDVolumes, actual.SoftwareRAIDVolumes) {
			return nil, nil
		}
		if len(target.SoftwareRAIDVolumes) == 0 && (actual == nil || len(actual.SoftwareRAIDVolumes) == 0) {
			return nil, nil
		}
		steps := []nodes.CleanStep{{Interface: nodes.InterfaceRAID, Step: "delete_configuration"}, {Interface: nodes.InterfaceDeploy, Step: "erase_devices_metadata"}}
		if len(target.SoftwareRAIDVolumes) == 0 {
			return steps, nil
		}
		return append(steps, nodes.CleanStep{Interface: nodes.InterfaceRAID, Step: "create_configuration"}), nil
	}
	if iface == "no-raid" || target == nil || target.HardwareRAIDVolumes == nil {
		return nil, nil
	}
	if actual != nil && reflect.DeepEqual(target.HardwareRAIDVolumes, actual.HardwareRAIDVolumes) {
		return nil, nil
	}
	steps := []nodes.CleanStep{{Interface: nodes.InterfaceRAID, Step: "delete_configuration"}}
	if len(target.HardwareRAIDVolumes) == 0 {
		return steps, nil
	}
	return append(steps, nodes.CleanStep{Interface: nodes.InterfaceRAID, Step: "create_configuration"}), nil
}

func (p *Provisioner) sameImage(n *nodes.Node) bool {
	if p.liveISO() {
		return n.InstanceInfo["boot_iso"] == p.host.Image.URL
	}
	return n.InstanceInfo["image_source"] == p.host.Image.URL
}

// liveISO is BMO's Image.IsLiveISO: the image is an ISO the machine boots
// as it is (deploy_interface ramdisk, instance_info boot_iso).
func (p *Provisioner) liveISO() bool { return p.host.Image.DiskFormat == "live-iso" }

// instanceUpdates are BMO's getInstanceUpdateOpts: a direct deploy, a
// live ISO or a custom deploy.
func (p *Provisioner) instanceUpdates(n *nodes.Node) *updater {
	u := &updater{}
	u.top("instance_uuid", p.host.UID, n.InstanceUUID)
	caps := map[string]any{}
	if p.bootMode() == "UEFISecureBoot" {
		caps["secure_boot"] = "true"
	}
	hints := map[string]any{}
	if d := p.host.RootDeviceName; d != "" {
		if strings.HasPrefix(d, "/dev/disk/by-path/") {
			hints["by_path"] = "s== " + d
		} else {
			hints["name"] = "s== " + d
		}
	}
	u.section("/instance_info", n.InstanceInfo, map[string]any{"capabilities": caps, "root_device": hints})
	img := p.host.Image
	opts := map[string]any{"boot_iso": nil, "image_source": img.URL, "image_disk_format": nilIfEmpty(img.DiskFormat), "image_pull_secret": nil}
	switch img.ChecksumType {
	case "", "auto":
		opts["image_checksum"], opts["image_os_hash_algo"], opts["image_os_hash_value"] = img.Checksum, nil, nil
	default:
		opts["image_checksum"], opts["image_os_hash_algo"], opts["image_os_hash_value"] = nil, img.ChecksumType, img.Checksum
	}
	if p.liveISO() && p.host.CustomDeployMethod == "" {
		// BMO's setLiveIsoUpdateOptsForNode: boot_iso, no image fields,
		// the ramdisk deploy.
		u.section("/instance_info", n.InstanceInfo, map[string]any{"boot_iso": img.URL, "image_source": nil,
			"image_os_hash_value": nil, "image_os_hash_algo": nil, "image_checksum": nil})
		u.top("deploy_interface", "ramdisk", n.DeployInterface)
		u.section("/driver_info", n.DriverInfo, map[string]any{"force_persistent_boot_device": "Default"})
		return u
	}
	if p.host.CustomDeployMethod != "" && img.URL == "" {
		// BMO's getCustomDeployUpdateOptsForNode without an image: every
		// image field removed.
		opts = map[string]any{"boot_iso": nil, "image_source": nil, "image_disk_format": nil, "image_checksum": nil,
			"image_os_hash_algo": nil, "image_os_hash_value": nil, "image_pull_secret": nil}
	}
	u.section("/instance_info", n.InstanceInfo, opts)
	if p.host.CustomDeployMethod != "" {
		u.top("deploy_interface", "custom-agent", n.DeployInterface)
	} else if n.DeployInterface == "ramdisk" || n.DeployInterface == "custom-agent" {
		u.top("deploy_interface", nil, n.DeployInterface)
	}
	u.section("/driver_info", n.DriverInfo, map[string]any{"force_persistent_boot_device": "Default"})
	return u
}

// deployInterface is the deploy_interface BMO creates the node with:
// custom-agent for a customDeploy host, else none (the default).
func (p *Provisioner) deployInterface() string {
	if p.host.CustomDeployMethod != "" {
		return "custom-agent"
	}
	return ""
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// setUpForProvisioning sets instance_info and validates the node.
func (p *Provisioner) setUpForProvisioning(ctx context.Context, n *nodes.Node) (Result, error) {
	n, err := p.update(ctx, n, p.instanceUpdates(n))
	if err != nil {
		return p.updateResult(err)
	}
	v, err := nodes.Validate(ctx, p.client, n.UUID).Extract()
	if gophercloud.ResponseCodeIs(err, http.StatusConflict) {
		return p.retryAfter(bmoRequeueDelay)
	}
	if err != nil {
		return Result{}, fmt.Errorf("failed to validate host during registration: %w", err)
	}
	var reasons []string
	if !v.Boot.Result {
		reasons = append(reasons, v.Boot.Reason)
	}
	if !v.Deploy.Result {
		reasons = append(reasons, v.Deploy.Reason)
	}
	if len(reasons) > 0 {
		return p.failed("host validation error: " + strings.Join(reasons, "; "))
	}
	return complete()
}

// configDrive is BMO's getConfigDrive: user data, network data and the
// metadata (BMO's defaults, overridden by the host's).
func (p *Provisioner) configDrive() nodes.ConfigDrive {
	var cd nodes.ConfigDrive
	if p.host.UserData != "" {
		cd.UserData = p.host.UserData
	}
	if p.host.NetworkData != nil {
		cd.NetworkData = p.host.NetworkData
	}
	cd.MetaData = map[string]any{
		"uuid": p.host.UID, "metal3-namespace": p.host.Namespace, "metal3-name": p.host.Name,
		"local-hostname": p.host.Name, "local_hostname": p.host.Name, "name": p.host.Name,
	}
	for k, v := range p.host.MetaData {
		cd.MetaData[k] = v
	}
	return cd
}

// Provision is BMO's Provision (a direct deploy, a live ISO, a custom
// deploy): provide from
// manageable, then from available instance_info, validation and active
// with a JSON config drive; waits for active.
func (p *Provisioner) Provision(ctx context.Context) (Result, error) {
	n, err := p.mustGetNode(ctx)
	if err != nil {
		return Result{}, err
	}
	switch nodes.ProvisionState(n.ProvisionState) {
	case nodes.DeployFail:
		if p.sameImage(n) {
			if n.LastError == "" {
				return p.retryAfter(0)
			}
			return p.failed("Image provisioning failed: " + n.LastError)
		}
		fallthrough
	case nodes.Available:
		if r, err := p.setUpForProvisioning(ctx, n); err != nil || r.Dirty || r.ErrorMessage != "" {
			return r, err
		}
		opts := nodes.ProvisionStateOpts{Target: nodes.TargetActive, ConfigDrive: p.configDrive()}
		if p.liveISO() {
			// BMO's getConfigDrive gives a live ISO none: the zero config
			// drive, which gophercloud sends as {}.
			opts.ConfigDrive = nodes.ConfigDrive{}
		}
		if m := p.host.CustomDeployMethod; m != "" {
			// BMO's customDeploy: the method as a deploy step at
			// priority 80, with empty args.
			opts.DeploySteps = []nodes.DeployStep{{Interface: nodes.InterfaceDeploy, Step: m, Args: map[string]any{}, Priority: 80}}
		}
		return p.changeProvisionState(ctx, n, opts)
	case nodes.Manageable:
		return p.changeProvisionState(ctx, n, nodes.ProvisionStateOpts{Target: nodes.TargetProvide})
	case nodes.CleanFail:
		if n.Maintenance {
			return p.setMaintenance(ctx, n, false, "")
		}
		return p.changeProvisionState(ctx, n, nodes.ProvisionStateOpts{Target: nodes.TargetManage})
	case nodes.Active:
		return complete()
	}
	return p.continuing(bmoRequeueDelay)
}

// changePower is BMO's changePower: it waits while a provision target is
// set, sends soft power off with BMO's timeout, and treats 409 as busy.
// A 400 for soft power off is ErrSoftPowerOffUnsupported.
func (p *Provisioner) changePower(ctx context.Context, n *nodes.Node, target nodes.TargetPowerState) (Result, error) {
	if n.TargetProvisionState != "" {
		return p.continuing(bmoRequeueDelay)
	}
	opts := nodes.PowerStateOpts{Target: target}
	if target == nodes.SoftPowerOff {
		opts.Timeout = softPowerOffTimeout
	}
	err := nodes.ChangePowerState(ctx, p.client, n.UUID, opts).ExtractErr()
	if err == nil {
		return p.continuing(0)
	}
	if gophercloud.ResponseCodeIs(err, http.StatusConflict) {
		return p.retryAfter(bmoRequeueDelay)
	}
	if target == nodes.SoftPowerOff && gophercloud.ResponseCodeIs(err, http.StatusBadRequest) {
		err = fmt.Errorf("%w: %w", ErrSoftPowerOffUnsupported, err)
	}
	return Result{}, fmt.Errorf("failed to %s node: %w", target, err)
}

// ErrSoftPowerOffUnsupported: the API refused soft power off with 400.
var ErrSoftPowerOffUnsupported = errors.New("soft power off is unsupported on BMC")

// PowerOn is BMO's PowerOn.
func (p *Provisioner) PowerOn(ctx context.Context, force bool) (Result, error) {
	n, err := p.mustGetNode(ctx)
	if err != nil {
		return Result{}, err
	}
	if n.PowerState == "power on" {
		return complete()
	}
	if n.TargetPowerState == "power on" {
		return p.continuing(bmoRequeueDelay)
	}
	if n.LastError != "" && !force {
		return p.failed("PowerOn operation failed: " + n.LastError)
	}
	return p.changePower(ctx, n, nodes.PowerOn)
}

// PowerOff is BMO's PowerOff outside inspection and cleaning: soft power
// off (soft reboot for disable_power_off nodes) unless hard or forced,
// hard power off after a 400 for soft.
func (p *Provisioner) PowerOff(ctx context.Context, soft, force bool) (Result, error) {
	n, err := p.mustGetNode(ctx)
	if err != nil {
		return Result{}, err
	}
	if n.PowerState == "power off" {
		return complete()
	}
	if n.TargetPowerState == "power off" || n.TargetPowerState == "soft power off" {
		return p.continuing(bmoRequeueDelay)
	}
	if n.TargetPowerState == "" && n.LastError != "" && !force && !strings.Contains(n.LastError, "aborted") {
		return p.failed(n.LastError)
	}
	if soft && !force {
		target := nodes.SoftPowerOff
		if n.DisablePowerOff {
			target = nodes.SoftRebooting
		}
		r, err := p.changePower(ctx, n, target)
		if !errors.Is(err, ErrSoftPowerOffUnsupported) {
			return r, err
		}
	}
	target := nodes.PowerOff
	if n.DisablePowerOff {
		target = nodes.Rebooting
	}
	return p.changePower(ctx, n, target)
}

// Adopt is BMO's Adopt: manageable → adopt, wait through adopting; an
// active node needs nothing (but clearing a maintenance set by hand).
func (p *Provisioner) Adopt(ctx context.Context) (Result, error) {
	n, err := p.mustGetNode(ctx)
	if err != nil {
		return Result{}, err
	}
	switch nodes.ProvisionState(n.ProvisionState) {
	case nodes.Enroll, nodes.Verifying:
		return Result{}, fmt.Errorf("invalid state for adopt: %s", n.ProvisionState)
	case nodes.Manageable:
		return p.changeProvisionState(ctx, n, nodes.ProvisionStateOpts{Target: nodes.TargetAdopt})
	case nodes.Adopting:
		return p.continuing(bmoRequeueDelay)
	case nodes.AdoptFail:
		return p.failed("Host adoption failed: " + n.LastError)
	case nodes.Active:
		if n.Maintenance && n.Fault == "" {
			return p.setMaintenance(ctx, n, false, "")
		}
	}
	return complete()
}

// Deprovision is BMO's Deprovision: automated_clean brought in line with
// the cleaning mode, deleted from active, wait for available.
func (p *Provisioner) Deprovision(ctx context.Context) (Result, error) {
	n, err := p.mustGetNode(ctx)
	if err != nil {
		return Result{}, err
	}
	switch nodes.ProvisionState(n.ProvisionState) {
	case nodes.Error:
		msg := n.LastError
		if msg == "" {
			msg = "Deprovisioning failed"
		}
		return Result{ErrorMessage: msg}, nil
	case nodes.CleanFail:
		return p.failed("Cleaning failed: " + n.LastError)
	case nodes.Manageable:
		return p.changeProvisionState(ctx, n, nodes.ProvisionStateOpts{Target: nodes.TargetProvide})
	case nodes.Available:
		return complete()
	case nodes.Deleting, nodes.Cleaning, nodes.CleanWait, nodes.Deploying:
		return p.continuing(bmoRequeueDelay)
	case nodes.Active, nodes.DeployFail, nodes.DeployWait:
		want := p.host.AutomatedCleaningMode != "disabled"
		if n.AutomatedClean == nil || *n.AutomatedClean != want {
			u := &updater{}
			u.top("automated_clean", want, n.AutomatedClean)
			if _, err := nodes.Update(ctx, p.client, n.UUID, u.ops).Extract(); err != nil {
				return Result{}, fmt.Errorf("failed to update automatedClean: %w", err)
			}
			return p.continuing(0)
		}
		return p.changeProvisionState(ctx, n, nodes.ProvisionStateOpts{Target: nodes.TargetDeleted})
	}
	return Result{}, fmt.Errorf("unhandled ironic state %s", n.ProvisionState)
}

// Delete is BMO's Delete (realDelete without force): a stale
// instance_uuid removed in available or manageable, maintenance set
// first in other stable states, DELETE (409: retry; 404: fine), done
// once the node is gone.
func (p *Provisioner) Delete(ctx context.Context) (Result, error) {
	n, err := p.getNode(ctx)
	if err != nil || n == nil {
		return Result{}, err
	}
	switch nodes.ProvisionState(n.ProvisionState) {
	case nodes.Verifying, nodes.Deploying, nodes.Cleaning, nodes.Inspecting, nodes.Servicing, nodes.Deleting,
		nodes.DeployWait, nodes.InspectWait, nodes.CleanWait, nodes.ServiceWait:
		return p.continuing(bmoRequeueDelay)
	case nodes.Enroll:
	case nodes.Available, nodes.Manageable:
		if n.InstanceUUID != "" {
			u := &updater{}
			u.top("instance_uuid", nil, n.InstanceUUID)
			if _, err := p.update(ctx, n, u); err != nil {
				return p.updateResult(err)
			}
		}
	default:
		if !n.Maintenance {
			return p.setMaintenance(ctx, n, true, forcingDeletionReason)
		}
	}
	err = nodes.Delete(ctx, p.client, n.UUID).ExtractErr()
	switch {
	case err == nil, gophercloud.ResponseCodeIs(err, http.StatusNotFound):
	case gophercloud.ResponseCodeIs(err, http.StatusConflict):
		return p.retryAfter(bmoRequeueDelay)
	default:
		return Result{}, fmt.Errorf("failed to remove host: %w", err)
	}
	return p.continuing(0)
}

// updater builds JSON patches as BMO's NodeUpdater: add (which also
// replaces) when the wanted value differs from the current one or the
// key is absent, remove when the wanted value is nil and the key is
// present, nothing when they are equal.
type updater struct{ ops nodes.UpdateOpts }

func (u *updater) top(name string, want, cur any) {
	u.op("/"+name, map[string]any{name: cur}, name, want)
}

func (u *updater) section(base string, cur map[string]any, want map[string]any) {
	for name, v := range want {
		u.op(base+"/"+name, cur, name, v)
	}
}

func (u *updater) op(path string, current map[string]any, name string, want any) {
	cur, present := current[name]
	want, cur = deref(want), deref(cur)
	if want != nil {
		if present && sameJSON(cur, want) {
			return
		}
		u.ops = append(u.ops, nodes.UpdateOperation{Op: nodes.AddOp, Path: path, Value: want})
		return
	}
	if present {
		u.ops = append(u.ops, nodes.UpdateOperation{Op: nodes.RemoveOp, Path: path})
	}
}

func deref(v any) any {
	if v == nil {
		return nil
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer {
		return v
	}
	if rv.IsNil() {
		return nil
	}
	return rv.Elem().Interface()
}

// sameJSON compares two values as the JSON they encode to (BMO compares
// maps, lists and scalars of the decoded node the same way).
func sameJSON(a, b any) bool {
	var x, y any
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	if err1 != nil || err2 != nil || json.Unmarshal(ja, &x) != nil || json.Unmarshal(jb, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// ErrNodeIsBusy is BMO's provisioner.ErrNodeIsBusy: the node holds a
// reservation, so BMO does not ask for its virtual media.
var ErrNodeIsBusy = errors.New("node is busy")

// vmediaEntry is one device of GET /v1/nodes/{node}/vmedia, as BMO's
// VirtualMedia type decodes it.
type vmediaEntry struct {
	Image      string   `json:"image"`
	Inserted   bool     `json:"inserted"`
	MediaTypes []string `json:"media_types"`
}

// GetDataImageStatus is BMO's: the node (busy while reserved), then its
// virtual media (API 1.93); attached when any device has media inserted.
func (p *Provisioner) GetDataImageStatus(ctx context.Context) (bool, error) {
	if p.MaxVersion < VirtualMediaGET {
		return false, fmt.Errorf("ironic version=%d doesn't support Virtual Media Get API, needs version>=1.93", p.MaxVersion)
	}
	n, err := p.getNode(ctx)
	if err != nil {
		return true, err
	}
	if n == nil {
		return false, errNeedsRegistration
	}
	if n.Reservation != "" {
		return false, ErrNodeIsBusy
	}
	r := nodes.GetVirtualMedia(ctx, p.client, p.host.ProvisioningID)
	if r.Err != nil {
		return false, r.Err
	}
	var list []vmediaEntry
	if err := r.ExtractInto(&list); err != nil {
		return false, err
	}
	for _, v := range list {
		if v.Inserted {
			return true, nil
		}
	}
	return false, nil
}

// AttachDataImage is BMO's: the image as a CD (API 1.89).
func (p *Provisioner) AttachDataImage(ctx context.Context, url string) error {
	return nodes.AttachVirtualMedia(ctx, p.client, p.host.ProvisioningID, nodes.AttachVirtualMediaOpts{
		DeviceType: nodes.VirtualMediaCD, ImageURL: url}).ExtractErr()
}

// DetachDataImage is BMO's: every CD ejected.
func (p *Provisioner) DetachDataImage(ctx context.Context) error {
	return nodes.DetachVirtualMedia(ctx, p.client, p.host.ProvisioningID, nodes.DetachVirtualMediaOpts{
		DeviceTypes: []nodes.VirtualMediaDeviceType{nodes.VirtualMediaCD}}).ExtractErr()
}

// ServicingData is the part of BMO's provisioner.ServicingData this
// client models: firmware settings (target and actual, by name), firmware
// updates, and whether the host's spec has any firmware part at all.
type ServicingData struct {
	TargetFirmwareSettings   map[string]string
	ActualFirmwareSettings   map[string]string
	TargetFirmwareComponents []FirmwareUpdate
	HasFirmwareSpec          bool
}

// Service is BMO's Service (its host updates on a provisioned host): from
// active, with unprepared, service with BMO's steps (bios.apply_configuration
// with the settings that differ, firmware.update with the components); it
// waits through servicing and service wait; a failed servicing is aborted
// when the spec lost its firmware parts, else restarted (restartOnFailure)
// or reported. started is as Prepare's.
func (p *Provisioner) Service(ctx context.Context, data ServicingData, unprepared, restartOnFailure bool) (Result, bool, error) {
	n, err := p.mustGetNode(ctx)
	if err != nil {
		return Result{}, false, err
	}
	done := func(r Result, err error) (Result, bool, error) { return r, false, err }
	abort := func() (Result, bool, error) {
		started, r, err := p.tryChangeProvisionState(ctx, n, nodes.ProvisionStateOpts{Target: nodes.TargetAbort})
		return r, started, err
	}
	switch nodes.ProvisionState(n.ProvisionState) {
	case nodes.ServiceFail:
		if !data.HasFirmwareSpec {
			return abort()
		}
		if !restartOnFailure {
			return done(p.failed(n.LastError))
		}
		if n.Maintenance {
			return done(p.setMaintenance(ctx, n, false, ""))
		}
		unprepared = true
		fallthrough
	case nodes.Active:
		if unprepared {
			steps := p.serviceSteps(data)
			if len(steps) != 0 {
				started, r, err := p.tryChangeProvisionState(ctx, n, nodes.ProvisionStateOpts{Target: nodes.TargetService, ServiceSteps: steps})
				return r, started, err
			}
			r, err := complete()
			return r, true, err // nothing to do
		}
		return done(complete())
	case nodes.Servicing:
		return done(p.continuing(bmoRequeueDelay))
	case nodes.ServiceWait:
		if !data.HasFirmwareSpec {
			return abort()
		}
		return done(p.continuing(bmoRequeueDelay))
	}
	return Result{}, false, fmt.Errorf("have unexpected ironic node state %s", n.ProvisionState)
}

// serviceSteps is BMO's buildServiceSteps: Prepare's BIOS and firmware
// steps, as service steps.
func (p *Provisioner) serviceSteps(data ServicingData) []nodes.ServiceStep {
	clean, _ := p.manualCleaningSteps(&AccessDetails{RAIDInterface: "no-raid"}, PrepareData{
		TargetFirmwareSettings: data.TargetFirmwareSettings, ActualFirmwareSettings: data.ActualFirmwareSettings,
		TargetFirmwareComponents: data.TargetFirmwareComponents})
	steps := make([]nodes.ServiceStep, 0, len(clean))
	for _, c := range clean {
		steps = append(steps, nodes.ServiceStep{Interface: nodes.StepInterface(c.Interface), Step: c.Step, Args: c.Args})
	}
	return steps
}

// AddBMCEventSubscriptionForNode is BMO's (a BMCEventSubscription): the
// node's vendor passthru create_subscription with the destination, the
// context and the headers BMO read from the subscription's secret; it
// answers the subscription's ID, which BMO keeps in its status.
func (p *Provisioner) AddBMCEventSubscriptionForNode(ctx context.Context, destination, subContext string, headers []map[string]string) (string, error) {
	s, err := nodes.CreateSubscription(ctx, p.client, p.host.ProvisioningID, nodes.CallVendorPassthruOpts{Method: "create_subscription"},
		nodes.CreateSubscriptionOpts{Destination: destination, Context: subContext, HttpHeaders: headers}).Extract()
	if err != nil {
		return "", err
	}
	return s.Id, nil
}

// RemoveBMCEventSubscriptionForNode is BMO's: delete_subscription by ID.
func (p *Provisioner) RemoveBMCEventSubscriptionForNode(ctx context.Context, id string) error {
	return nodes.DeleteSubscription(ctx, p.client, p.host.ProvisioningID, nodes.CallVendorPassthruOpts{Method: "delete_subscription"},
		nodes.DeleteSubscriptionOpts{Id: id}).ExtractErr()
}
