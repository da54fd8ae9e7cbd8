package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/bmc"
	"github.com/ironflow/ironflow/configdrive"
	"github.com/ironflow/ironflow/console"
	"github.com/ironflow/ironflow/glance"
	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/inspection/hooks"
	"github.com/ironflow/ironflow/inspection/rules"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// Named defaults for every timer and retry bound (README: configuration).
const (
	DefaultCallbackTimeout = 30 * time.Minute
	// DefaultRescueCallbackTimeout is Ironic's rescue_callback_timeout.
	DefaultRescueCallbackTimeout = 30 * time.Minute
	DefaultHeartbeatTimeout      = 300 * time.Second
	DefaultOperatorWaitTimeout   = time.Hour
	DefaultBMCAttempts           = 5
	DefaultBMCInitialInterval    = 2 * time.Second
	DefaultBMCCallTimeout        = 2 * time.Minute
	DefaultAgentCommandTimeout   = 2 * time.Hour
	DefaultAgentPollInterval     = 2 * time.Second
	// DefaultAgentActivityHeartbeat: RunAgentStep reports every 10 s.
	DefaultAgentActivityHeartbeat = 30 * time.Second
	DefaultEraseMetadataPrio      = 99
	DefaultErasePrio              = 0
)

// DefaultPolicy is the policy in force when configuration says nothing.
func DefaultPolicy() workflows.Policy {
	return workflows.Policy{
		CallbackTimeout:              DefaultCallbackTimeout,
		RescueCallbackTimeout:        DefaultRescueCallbackTimeout,
		HeartbeatTimeout:             DefaultHeartbeatTimeout,
		OperatorWaitTimeout:          DefaultOperatorWaitTimeout,
		BMCAttempts:                  DefaultBMCAttempts,
		BMCInitialInterval:           DefaultBMCInitialInterval,
		BMCCallTimeout:               DefaultBMCCallTimeout,
		AgentCommandTimeout:          DefaultAgentCommandTimeout,
		AgentActivityHeartbeat:       DefaultAgentActivityHeartbeat,
		EraseDevicesMetadataPriority: DefaultEraseMetadataPrio,
		EraseDevicesPriority:         DefaultErasePrio,
	}
}

// Config is what the activities need to know of the deployment.
type Config struct {
	Policy workflows.Policy
	// AutomatedClean is the global default for nodes whose automated_clean
	// is unset (Ironic's [conductor]automated_clean).
	AutomatedClean bool
	// APIURL is the ironflow API as the agent reaches it (ipa-api-url).
	APIURL string
	// BootURL is the PXE HTTP service as machines reach it.
	BootURL string
	// AgentKernelURL and AgentInitrdURL default to BootURL/images/agent.kernel
	// and agent.initramfs.
	AgentKernelURL, AgentInitrdURL string
	// AgentKernelParams are appended to the agent's command line (x86_64).
	AgentKernelParams string
	// InspectionKernelParams are appended too when the agent boots to
	// inspect (Ironic's [inspector]extra_kernel_params);
	// DefaultInspectionKernelParams has the agent collect LLDP.
	InspectionKernelParams string
	// InspectionHooks run on an in-band inspection's inventory, in order
	// (nil: hooks.DefaultHooks); InspectionHookConfig is their settings.
	InspectionHooks      []string
	InspectionHookConfig hooks.Config
	// BuiltInRules run with the stored inspection rules (Ironic's
	// [inspection_rules]built_in_rules, rules.LoadBuiltIn);
	// RulesMaskSecrets is [inspection_rules]mask_secrets ("always" when
	// empty, "sensitive", "never").
	BuiltInRules     []rules.Rule
	RulesMaskSecrets string
	// AgentArchitectures are the cpu_arch values (arch.go) whose agent and
	// loader the boot service has (DefaultAgentArchitectures when empty):
	// a node of any other architecture fails boot preparation, before it
	// is powered on. An architecture other than x86_64 boots
	// AgentKernelURL.<arch> and AgentInitrdURL.<arch>, with
	// AgentKernelParamsByArch[arch] on its command line.
	AgentArchitectures      []string
	AgentKernelParamsByArch map[string]string
	// AgentPollInterval is how often a running agent command is polled.
	AgentPollInterval time.Duration
	// AgentInsecure skips TLS verification of the agent (labs).
	AgentInsecure bool
	// Conductor names this worker in node history.
	Conductor string
	// DisableHealthMonitoring: the power sync does not read nodes' hardware
	// health (Ironic's [conductor] enable_health_monitoring = False); the
	// stored health stays as it was.
	DisableHealthMonitoring bool
	// VirtualMedia builds and removes per-node agent ISOs; nil when the
	// worker cannot serve virtual media.
	VirtualMedia VirtualMedia
	// Glance resolves Glance image_sources (nil: none configured);
	// GlanceAuth is its auth method (none, http_basic).
	Glance     *glance.Client
	GlanceAuth string
	// ForceRawImages says the boot service's image cache converts qcow2
	// images to raw (--force-raw-images, set alike on both).
	ForceRawImages bool
	// ConsoleHolderTimeout: a console holder whose conductor heartbeat is
	// older is gone (DefaultConsoleHolderTimeout when 0).
	ConsoleHolderTimeout time.Duration
	// IPXEBootfileByArch names, per cpu_arch, the iPXE loader a node whose
	// boot interface is http-ipxe fetches over UEFI HTTP boot from the
	// boot service's /loaders/ (Ironic's [pxe]ipxe_bootfile_name_by_arch);
	// DefaultIPXEBootfileByArch when nil.
	IPXEBootfileByArch map[string]string
	// LoaderBaseURL is the boot service that serves those loaders under
	// /loaders/ (an https:// one for UEFI HTTPS boot, while iPXE's script
	// and images stay on BootURL); BootURL when empty.
	LoaderBaseURL string
}

// VirtualMedia is what the activities need from the ISO builder.
type VirtualMedia interface {
	// BuildAgentISO builds the node's agent ISO and returns the URL a BMC
	// downloads it from.
	BuildAgentISO(ctx context.Context, req AgentISO) (string, error)
	RemoveAgentISO(nodeUUID string) error
}

// AgentISO is what goes on a node's agent ISO command line. Token is a
// secret: it must never be logged.
type AgentISO struct {
	NodeUUID, APIURL, Token, KernelParams string
	// SecureBoot: the machine boots with secure boot on; the ISO's UEFI
	// entry is then the signed chain (pxe.ISOParams.SecureBoot).
	SecureBoot bool
	// NetworkData is the node's network_data (JSON) for the agent on a
	// network without DHCP; nil when the node has none.
	NetworkData []byte
}

// Activities holds the dependencies every activity shares.
type Activities struct {
	Store  *store.Store
	Config Config
	Log    *slog.Logger
	// NewBMC builds a node's BMC driver; bmc.New by default.
	NewBMC func(driver string, info map[string]any) (bmc.Driver, error)
	// Consoles holds the consoles of this worker process (console.go);
	// nil in a process that holds none.
	Consoles *console.Manager

	agents agentConns
}

// New returns the activities with defaults filled in.
func New(st *store.Store, cfg Config, log *slog.Logger) *Activities {
	if cfg.Policy == (workflows.Policy{}) {
		cfg.Policy = DefaultPolicy()
	}
	if cfg.AgentPollInterval == 0 {
		cfg.AgentPollInterval = DefaultAgentPollInterval
	}
	if cfg.AgentKernelURL == "" {
		cfg.AgentKernelURL = strings.TrimRight(cfg.BootURL, "/") + "/images/agent.kernel"
	}
	if cfg.AgentInitrdURL == "" {
		cfg.AgentInitrdURL = strings.TrimRight(cfg.BootURL, "/") + "/images/agent.initramfs"
	}
	if log == nil {
		log = slog.Default()
	}
	return &Activities{Store: st, Config: cfg, Log: log, NewBMC: bmc.New}
}

// LoadNode reads what a workflow needs of a node, with the policy in force
// for it. Local activity.
func (a *Activities) LoadNode(ctx context.Context, nodeUUID string) (workflows.NodeInfo, error) {
	crashPoint(ctx, nodeUUID, "LoadNode", "start")
	n, macs, err := a.Store.GetNodeForWork(ctx, nodeUUID)
	if err != nil {
		return workflows.NodeInfo{}, storeErr(err, "load node %s", nodeUUID)
	}
	info := workflows.NodeInfo{
		UUID:             n.UUID,
		Driver:           n.Driver,
		BootInterface:    hardware.Interface(n.BootInterface),
		DeployInterface:  hardware.Interface(n.DeployInterface),
		InspectInterface: hardware.Interface(n.InspectInterface),
		RescueInterface:  hardware.Interface(n.RescueInterface),
		BIOSInterface:    hardware.Interface(n.BIOSInterface),
		RAIDInterface:    hardware.Interface(n.RAIDInterface),
		// The firmware update step (workflows/firmware.go).
		FirmwareInterface: hardware.Interface(n.FirmwareInterface),
		ConductorGroup:    n.ConductorGroup,
		ProvisionState:    n.ProvisionState,
		BootMode:          "bios",
		AutomatedClean:    a.Config.AutomatedClean,
		Policy:            a.Config.Policy,
		DisablePowerOff:   n.DisablePowerOff,
	}
	if n.PowerState != nil {
		info.PowerState = *n.PowerState
	}
	if n.AutomatedClean != nil {
		info.AutomatedClean = *n.AutomatedClean
	}
	info.BootMode = bootMode(n)
	info.SecureBoot = secureBootRequested(n) // activities/secureboot.go
	info.MACs = macs
	if ht, ok := hardware.Lookup(n.Driver); ok && ht.Has(hardware.CapInMemoryBMC) {
		info.Policy.LocalBMC = true
	}
	if err := applyOverrides(&info.Policy, n.DriverInfo); err != nil {
		return workflows.NodeInfo{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("driver_info of node %s: %v", n.UUID, err), workflows.ErrTypeInvalidConfig, err)
	}
	return info, nil
}

// bootMode is the node's boot mode: the boot_mode field, else
// instance_info.deploy_boot_mode, else instance_info.capabilities boot_mode
// (Nova writes the flavor's capabilities there as a JSON object, or its
// text), else properties.capabilities boot_mode:uefi, else bios.
func bootMode(n *store.Node) string {
	if n.BootMode != nil && *n.BootMode != "" {
		return *n.BootMode
	}
	if v, ok := n.InstanceInfo["deploy_boot_mode"].(string); ok && v != "" {
		return v
	}
	caps, _ := n.InstanceInfo["capabilities"].(map[string]any)
	if text, ok := n.InstanceInfo["capabilities"].(string); ok {
		_ = json.Unmarshal([]byte(text), &caps)
	}
	if v, ok := caps["boot_mode"].(string); ok && (v == "uefi" || v == "bios") {
		return v
	}
	if caps, ok := n.Properties["capabilities"].(string); ok {
		for _, c := range strings.Split(caps, ",") {
			if k, v, ok := strings.Cut(strings.TrimSpace(c), ":"); ok && k == "boot_mode" {
				return v
			}
		}
	}
	return "bios"
}

// overrideKeys set the Policy fields driver_info may override per node.
var overrideKeys = map[string]func(*workflows.Policy, time.Duration){
	workflows.DriverInfoCallbackTimeout:       func(p *workflows.Policy, d time.Duration) { p.CallbackTimeout = d },
	workflows.DriverInfoHeartbeatTimeout:      func(p *workflows.Policy, d time.Duration) { p.HeartbeatTimeout = d },
	workflows.DriverInfoOperatorWaitTimeout:   func(p *workflows.Policy, d time.Duration) { p.OperatorWaitTimeout = d },
	workflows.DriverInfoRescueCallbackTimeout: func(p *workflows.Policy, d time.Duration) { p.RescueCallbackTimeout = d },
}

func applyOverrides(p *workflows.Policy, driverInfo map[string]any) error {
	for key, set := range overrideKeys {
		d, ok, err := workflows.DriverInfoSeconds(driverInfo, key)
		if err != nil {
			return err
		}
		if ok {
			set(p, d)
		}
	}
	return nil
}

// RecordState changes the provision state and writes history, in the
// store. Local activity.
func (a *Activities) RecordState(ctx context.Context, in workflows.RecordStateInput) error {
	point := "RecordState/" + string(in.To)
	crashPoint(ctx, in.NodeUUID, point, "start")
	t := store.Transition{
		To: in.To, Target: optional(in.Target), LastError: optional(in.LastError),
		StepKind: in.StepKind, From: in.From,
		History: store.HistoryEvent{
			Severity: in.Severity, EventType: in.EventType, Event: in.Event, Conductor: a.Config.Conductor,
		},
	}
	if in.Step != nil {
		t.Step = in.Step.View()
	}
	if in.ClearAgent {
		t.DropInternal = store.AgentSessionKeys()
	}
	run := runID(ctx)
	if run != "" {
		t.SetInternal = map[string]any{keyProvisionRun: provisionRun{Run: run, State: in.To}}
	}
	if in.StepPlan != nil {
		kv, drop := stepPlanChanges(*in.StepPlan)
		t.DropInternal = append(t.DropInternal, drop...)
		if len(kv) > 0 && t.SetInternal == nil {
			t.SetInternal = make(map[string]any, len(kv))
		}
		for k, v := range kv {
			t.SetInternal[k] = v
		}
	}
	if err := a.Store.RecordTransition(ctx, in.NodeUUID, t); err != nil {
		if len(in.From) > 0 && errors.Is(err, store.ErrStateConflict) && a.movedByThisRun(ctx, in.NodeUUID, run) {
			// This run already took the node further before a worker
			// crash, and now runs again from its last recorded point:
			// the node is where this run put it, not taken by another
			// verb (effects.go).
			a.Log.Info("conditional state record run again after a worker restart: the node is where this workflow run left it",
				"node", in.NodeUUID, "to", in.To)
			return nil
		}
		return storeErr(err, "record state %q for node %s", in.To, in.NodeUUID)
	}
	crashPoint(ctx, in.NodeUUID, point, "after")
	if waitsForAgent(in.To) {
		// Where the console is, while the machine boots the agent
		// (docs/console.md); nothing for a node without one.
		if err := a.Store.AddConsoleWhereabouts(ctx, in.NodeUUID, string(in.To), a.Config.Conductor); err != nil {
			a.Log.Warn("record where the console is", "node", in.NodeUUID, "error", err)
		}
	}
	return nil
}

// waitsForAgent: the states in which a node waits for its agent to boot
// and call back.
func waitsForAgent(s provision.State) bool {
	switch s {
	case provision.DeployWait, provision.CleanWait, provision.InspectWait, provision.RescueWait, provision.ServiceWait:
		return true
	}
	return false
}

// showStep records the step an activity begins as the node's deploy_step
// or clean_step (provision.RunningStep); nil records nothing.
func (a *Activities) showStep(ctx context.Context, nodeUUID string, rs *provision.RunningStep) error {
	if rs == nil {
		return nil
	}
	if rs.Index != nil {
		// The plan moves to the step in the same write (what RecordStepPlan
		// writes for an index alone).
		err := awaitStore(ctx, func() error {
			return a.Store.RecordStepAt(ctx, nodeUUID, string(rs.Kind), rs.Step.View(), stepIndexKey(rs.Kind), *rs.Index,
				[]string{workflows.StepProgressKey(rs.Kind)})
		})
		return storeErr(err, "record step %s of node %s", rs.Step.Name(), nodeUUID)
	}
	err := awaitStore(ctx, func() error { return a.Store.RecordStep(ctx, nodeUUID, string(rs.Kind), rs.Step.View()) })
	return storeErr(err, "record step %s of node %s", rs.Step.Name(), nodeUUID)
}

func (a *Activities) history(ctx context.Context, nodeUUID, severity, eventType, event string) error {
	if event == "" {
		return nil
	}
	if severity == "" {
		severity = store.SeverityInfo
	}
	err := a.Store.AddHistory(ctx, nodeUUID, store.HistoryEvent{
		Severity: severity, EventType: eventType, Event: event, Conductor: a.Config.Conductor, User: "",
	})
	return storeErr(err, "add history for node %s", nodeUUID)
}

// RecordPowerState stores the power state a BMC reported. Local activity.
func (a *Activities) RecordPowerState(ctx context.Context, in workflows.PowerStateRecord) error {
	var err error
	if in.KeepPowerState {
		_, err = a.Store.UpdateNode(ctx, in.NodeUUID, func(n *store.Node) error {
			n.TargetPowerState, n.LastError = nil, optional(in.LastError)
			return nil
		})
	} else {
		_, err = a.Store.SetPowerState(ctx, in.NodeUUID, optional(in.PowerState), nil, optional(in.LastError))
	}
	if err != nil {
		return storeErr(err, "record power state of node %s", in.NodeUUID)
	}
	return a.history(ctx, in.NodeUUID, in.Severity, "power", in.Event)
}

// ClearInstanceInfo empties instance_info and the instance association
// (instance_uuid, instance_name), as Ironic does on undeploy. Local
// activity.
func (a *Activities) ClearInstanceInfo(ctx context.Context, nodeUUID string) error {
	crashPoint(ctx, nodeUUID, "ClearInstanceInfo", "start")
	defer crashPoint(ctx, nodeUUID, "ClearInstanceInfo", "after")
	_, err := a.Store.UpdateNode(ctx, nodeUUID, func(n *store.Node) error {
		n.InstanceInfo = map[string]any{}
		n.InstanceUUID = nil
		n.InstanceName = nil // API 1.104, cleared with the instance as Ironic's tear_down
		delete(n.DriverInternalInfo, "is_whole_disk_image")
		return nil
	})
	return storeErr(err, "clear instance_info of node %s", nodeUUID)
}

// DefaultInspectionKernelParams: the agent listens for LLDP on every
// interface (IPA's collect_lldp), so that inspection's plugin_data has
// each NIC's switch port (parsed_lldp).
const DefaultInspectionKernelParams = "ipa-collect-lldp=1"

// bootParams is extra with what a boot of kind adds: the inspection
// parameters when the agent boots to inspect.
func (a *Activities) bootParams(kind workflows.BootKind, extra string) string {
	if kind == workflows.BootInspect && a.Config.InspectionKernelParams != "" {
		return strings.TrimSpace(extra + " " + a.Config.InspectionKernelParams)
	}
	return extra
}

// agentKernelParams is the agent's command line for a node, with extra,
// its architecture's parameters (arch.go).
func (a *Activities) agentKernelParams(nodeUUID, extra string) string {
	return strings.Join(append([]string{"ipa-api-url=" + a.Config.APIURL}, a.agentExtraParams(nodeUUID, extra)...), " ")
}

// agentExtraParams are the agent parameters besides the API URL.
func (a *Activities) agentExtraParams(nodeUUID, extra string) []string {
	parts := []string{"ipa-node-uuid=" + nodeUUID}
	if a.Config.AgentInsecure {
		parts = append(parts, "ipa-insecure=1")
	}
	if extra != "" {
		parts = append(parts, extra)
	}
	return parts
}

// storeErr turns store failures into activity errors: a missing node or a
// lost state race cannot be fixed by retrying, anything else (the database
// restarting) can.
func storeErr(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	msg := fmt.Sprintf(format, args...) + ": " + err.Error()
	switch {
	case errors.Is(err, store.ErrNotFound):
		return temporal.NewNonRetryableApplicationError(msg, workflows.ErrTypeNodeGone, err)
	case errors.Is(err, store.ErrStateConflict):
		return temporal.NewNonRetryableApplicationError(msg, workflows.ErrTypeStateConflict, err)
	}
	return temporal.NewApplicationError(msg, "StoreError", err)
}

func optional[T ~string](s T) *T {
	if s == "" {
		return nil
	}
	return &s
}

// redactURL hides credentials in a URL for messages.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	u.User = url.User("******")
	return u.String()
}

// StoreConfigDrive keeps the deploy request's config drive with the node, in
// instance_info.configdrive as Ironic does: a string (gzip+base64 ISO or URL)
// as given, a JSON dict built into a config-2 ISO first. Local activity.
func (a *Activities) StoreConfigDrive(ctx context.Context, in workflows.ConfigDriveInput) error {
	crashPoint(ctx, in.NodeUUID, "StoreConfigDrive", "start")
	defer crashPoint(ctx, in.NodeUUID, "StoreConfigDrive", "after")
	value, err := configdrive.ForInstanceInfo(in.ConfigDrive)
	if err != nil {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("configdrive of node %s: %v", in.NodeUUID, err), workflows.ErrTypeInvalidConfig, err)
	}
	_, err = a.Store.UpdateNode(ctx, in.NodeUUID, func(n *store.Node) error {
		n.InstanceInfo["configdrive"] = value
		return nil
	})
	return storeErr(err, "store configdrive of node %s", in.NodeUUID)
}
