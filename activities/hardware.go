package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/bmc"
	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// driver builds the node's BMC driver from its current driver_info (read
// from the store here, so that credentials never travel through workflow
// history).
func (a *Activities) driver(ctx context.Context, node workflows.NodeInfo) (bmc.Driver, error) {
	_, d, err := a.nodeDriver(ctx, node)
	return d, err
}

// driverColumns are what nodeDriver reads of a node: its driver and
// driver_info for the BMC, driver_internal_info for the marks of
// effects.go. A BMC call (every power and boot-device change of a deploy)
// leaves the node's other JSON columns undecoded.
var driverColumns = store.MustNodeColumns("driver", "driver_info", "driver_internal_info", "disable_power_off")

// nodeDriver is driver that also returns the node as it loaded it, for an
// activity that reads more of it (the marks of effects.go) without loading
// it again: only driverColumns are set.
func (a *Activities) nodeDriver(ctx context.Context, node workflows.NodeInfo) (*store.Node, bmc.Driver, error) {
	var n *store.Node
	err := awaitStore(ctx, func() (err error) {
		n, err = a.Store.GetNodeColumns(ctx, node.UUID, driverColumns)
		return err
	})
	if err != nil {
		return nil, nil, storeErr(err, "load driver_info of node %s", node.UUID)
	}
	d, err := a.driverOf(n)
	return n, d, err
}

// driverOf builds the BMC driver of a loaded node.
func (a *Activities) driverOf(n *store.Node) (bmc.Driver, error) {
	info := maps.Clone(n.DriverInfo)
	if info == nil {
		info = map[string]any{}
	}
	if ht, ok := hardware.Lookup(n.Driver); ok {
		for _, k := range ht.AllKeys() {
			if _, set := info[k.Name]; k.DefaultsToNodeUUID && !set {
				info[k.Name] = n.UUID
			}
		}
	}
	d, err := a.NewBMC(n.Driver, info)
	if err != nil {
		return nil, bmcErr(err, "set up the %s driver of node %s", n.Driver, n.UUID)
	}
	return d, nil
}

// bmcErr maps the driver's typed errors onto Temporal's retry decision.
func bmcErr(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	msg := fmt.Sprintf(format, args...) + ": " + err.Error()
	switch {
	case errors.Is(err, bmc.ErrAuth):
		return temporal.NewNonRetryableApplicationError(msg, workflows.ErrTypeBMCAuth, err)
	case errors.Is(err, bmc.ErrUnsupported):
		return temporal.NewNonRetryableApplicationError(msg, workflows.ErrTypeBMCUnsupported, err)
	case errors.Is(err, bmc.ErrInvalidConfig):
		return temporal.NewNonRetryableApplicationError(msg, workflows.ErrTypeInvalidConfig, err)
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return err
	}
	return temporal.NewApplicationError(msg, "BMCError", err)
}

// GetPowerState reads the power state from the BMC.
func (a *Activities) GetPowerState(ctx context.Context, node workflows.NodeInfo) (string, error) {
	d, err := a.driver(ctx, node)
	if err != nil {
		return "", err
	}
	defer d.Close()
	if err := d.Validate(ctx); err != nil {
		return "", bmcErr(err, "validate BMC of node %s", node.UUID)
	}
	s, err := d.PowerState(ctx)
	if err != nil {
		return "", bmcErr(err, "get power state of node %s", node.UUID)
	}
	return string(s), nil
}

// ValidateHardware checks driver_info and that the BMC answers.
func (a *Activities) ValidateHardware(ctx context.Context, node workflows.NodeInfo) error {
	d, err := a.driver(ctx, node)
	if err != nil {
		return err
	}
	defer d.Close()
	return bmcErr(d.Validate(ctx), "validate BMC of node %s", node.UUID)
}

// SetPower performs a power action and returns the state the BMC then
// reports; it also records it. Rebooting a machine that is off powers it on
// (never a cycle that would reboot a healthy node twice after a retry), and
// powering on a machine that is on does nothing. A reboot that this very
// call already sent before a worker crash is not sent again, and a power
// call that completed before a crash is not run again when its workflow
// task's local activities run again (effects.go).
func (a *Activities) SetPower(ctx context.Context, in workflows.PowerInput) (string, error) {
	point := "SetPower/" + in.Action
	crashPoint(ctx, in.Node.UUID, point, "start")
	n, d, err := a.nodeDriver(ctx, in.Node)
	if err != nil {
		return "", err
	}
	defer d.Close()
	// The API's timeout bounds each wait for a power state, as Ironic's
	// drivers apply it, not the whole call (bmc.WithPowerTimeout).
	ctx = bmc.WithPowerTimeout(ctx, time.Duration(in.TimeoutSeconds)*time.Second)
	action := bmc.PowerAction(in.Action)
	current, err := d.PowerState(ctx)
	if err != nil {
		return "", bmcErr(err, "get power state of node %s", in.Node.UUID)
	}
	mark := map[string]any{}
	if n.DisablePowerOff {
		var skipped bool
		action, skipped = withoutPowerOff(n, action, current, in.Requested)
		if skipped {
			a.Log.Info("disable_power_off: the power stays on", "node", in.Node.UUID, "action", in.Action)
		}
		mark[keyPowerOffSkipped] = skipped
	}
	// The marks are read from the node as the driver loaded it: only this
	// workflow's power calls write them, one at a time.
	replayed := completedLocalCallIn(ctx, n, keyPowerCall)
	reboot := action == bmc.ActionReboot || action == bmc.ActionSoftReboot || action == bmc.ActionReset
	again := false
	if reboot && !replayed {
		if again, err = a.repeatedIn(ctx, n, keyRebootCall, nil); err != nil {
			return "", err
		}
	}
	switch {
	case replayed:
		// This call, or a later power call of the same run, completed
		// before the worker died: the workflow task runs its local
		// activities again from the last recorded one. Acting again would
		// power off the instance that the later call powered on.
		a.Log.Info("power action already done by this workflow run before a worker restart", "node", in.Node.UUID, "action", in.Action)
	case reboot && again && current == bmc.PowerOn:
		// This call rebooted the machine (or powered it on) before the
		// worker died: it boots already, a second reboot would boot it twice.
		a.Log.Info("reboot already sent by this call before a worker restart", "node", in.Node.UUID)
	case action == "",
		action == bmc.ActionPowerOn && current == bmc.PowerOn,
		(action == bmc.ActionPowerOff || action == bmc.ActionSoftOff) && current == bmc.PowerOff:
		// Already there: idempotent on retry and after a worker crash.
	case (action == bmc.ActionReboot || action == bmc.ActionSoftReboot) && current == bmc.PowerOff:
		if err := d.SetPower(ctx, bmc.ActionPowerOn); err != nil {
			return "", bmcErr(err, "power on node %s", in.Node.UUID)
		}
	default:
		if err := d.SetPower(ctx, action); err != nil {
			return "", a.powerFailure(ctx, d, in, err)
		}
	}
	crashPoint(ctx, in.Node.UUID, point, "after")
	state, err := d.PowerState(ctx)
	if err != nil {
		return "", bmcErr(err, "get power state of node %s", in.Node.UUID)
	}
	// The state and the mark that this call completed go in one write: a
	// crash between two writes would leave the state without the mark, and
	// the call would run again.
	if call, ok := localCallOf(ctx); ok {
		mark[keyPowerCall] = call
	}
	if err := a.Store.SetPowerStateMerging(ctx, in.Node.UUID, optional(string(state)), mark); err != nil {
		return "", storeErr(err, "record power state of node %s", in.Node.UUID)
	}
	return string(state), nil
}

// keyPowerOffSkipped (driver_internal_info) says that a workflow's power
// off of a node with disable_power_off was skipped, the machine left on:
// the power on that follows reboots it instead.
const keyPowerOffSkipped = "power_off_skipped"

// withoutPowerOff is the action a node with disable_power_off takes instead
// of action (Ironic master's handling of the flag: the power interfaces'
// reboot without a power off, deploy_utils' power_off_and_on, agent_base's
// tear_down and boot_instance): no power off ("" and skipped true: the
// machine stays on), a reset for a reboot of a machine that is on, and a
// reset for the power on that follows a skipped power off, so that the
// machine boots what the workflow prepared. The API refuses the power off
// requests of such a node; these come from workflows. A user's power on
// (requested) of a machine that is on does nothing, as for any node.
func withoutPowerOff(n *store.Node, action bmc.PowerAction, current bmc.PowerState, requested bool) (bmc.PowerAction, bool) {
	wasSkipped, _ := n.DriverInternalInfo[keyPowerOffSkipped].(bool)
	switch {
	case action == bmc.ActionPowerOff || action == bmc.ActionSoftOff:
		return "", true
	case current != bmc.PowerOn:
		return action, false
	case action == bmc.ActionReboot || action == bmc.ActionSoftReboot:
		return bmc.ActionReset, false
	case action == bmc.ActionPowerOn && wasSkipped && !requested:
		return bmc.ActionReset, false
	}
	return action, false
}

// powerFailure is the error of a failed power action. A soft power off the
// machine ignored is final, not retried (Ironic's PowerStateFailure, with
// its message), and carries the power state the BMC reads now: the node
// records it, and its client may fall back to a hard power off.
func (a *Activities) powerFailure(ctx context.Context, d bmc.Driver, in workflows.PowerInput, err error) error {
	if !errors.Is(err, bmc.ErrSoftPowerOffTimeout) {
		return bmcErr(err, "%s node %s", in.Action, in.Node.UUID)
	}
	a.Log.Warn("soft power action timed out", "node", in.Node.UUID, "action", in.Action, "error", err)
	state, rerr := d.PowerState(context.WithoutCancel(ctx))
	if rerr != nil {
		state = ""
	}
	return temporal.NewNonRetryableApplicationError(bmc.ErrSoftPowerOffTimeout.Error(), workflows.ErrTypePowerStateFailure, err, string(state))
}

// SetBootDevice points the node's next boot (or every boot) at a device.
func (a *Activities) SetBootDevice(ctx context.Context, in workflows.BootDeviceInput) error {
	point := "SetBootDevice/" + in.Device
	crashPoint(ctx, in.Node.UUID, point, "start")
	s := bmc.BootSetting{Device: bmc.BootDevice(in.Device), Persistent: in.Persistent, Mode: bmc.BootMode(in.Node.BootMode)}
	var err error
	if s.HTTPBootURI, err = a.httpBootURI(ctx, in.Node, s.Device); err != nil {
		return err
	}
	d, err := a.driver(ctx, in.Node)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.SetBootDevice(ctx, s); err != nil {
		return bmcErr(err, "set boot device %s on node %s", in.Device, in.Node.UUID)
	}
	crashPoint(ctx, in.Node.UUID, point, "after")
	err = a.Store.MergeDriverInternalInfo(ctx, in.Node.UUID, map[string]any{
		"boot_device": map[string]any{"boot_device": in.Device, "persistent": in.Persistent},
	})
	return storeErr(err, "record boot device of node %s", in.Node.UUID)
}

// httpBootURI is what a boot of device from the BMC fetches: for
// uefihttp on a node that boots a URL (redfish-https), the URL of the
// agent ISO its boot preparation built; "" otherwise (the URL DHCP gives).
func (a *Activities) httpBootURI(ctx context.Context, node workflows.NodeInfo, device bmc.BootDevice) (string, error) {
	if device != bmc.BootUefiHTTP || !hardware.BootOf(node.BootInterface).BootsURL() {
		return "", nil
	}
	bc, err := a.Store.GetBootConfig(ctx, node.UUID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return "", storeErr(err, "load boot configuration of node %s", node.UUID)
	}
	if bc == nil || bc.ISOPath == "" {
		return "", invalidConfig("node %s boots the agent ISO by UEFI HTTP boot (boot interface %s), but no ISO was prepared for it", node.UUID, node.BootInterface)
	}
	return bc.ISOPath, nil
}

// PrepareBoot makes the node's next network or virtual-media boot load
// what in.Kind names: for the agent (to deploy, clean or inspect) a boot
// configuration the PXE services serve (PXE), or an ISO with a
// pre-generated agent token inserted through the BMC (virtual media); the
// instance's ramdisk; the installer.
func (a *Activities) PrepareBoot(ctx context.Context, in workflows.BootInput) error {
	node := in.Node
	point := "PrepareBoot/" + string(in.Kind)
	crashPoint(ctx, node.UUID, point, "start")
	defer crashPoint(ctx, node.UUID, point, "after")
	if err := a.showStep(ctx, node.UUID, in.Starts); err != nil {
		return err
	}
	var loaded *store.Node
	var err error
	switch in.Kind {
	case workflows.BootRamdisk:
		return a.prepareRamdisk(ctx, node)
	case workflows.BootAnaconda:
		return a.prepareAnaconda(ctx, node)
	case workflows.BootAgent, workflows.BootInspect, workflows.BootRescue:
		if loaded, err = a.Store.GetNode(ctx, node.UUID); err != nil {
			return storeErr(err, "load node %s", node.UUID)
		} else if d := hardware.DeployOf(hardware.Interface(loaded.DeployInterface)); in.Kind == workflows.BootAgent && deploying(loaded) &&
			!(d.Flow() == hardware.FlowAgent && !d.WritesImage()) { // custom-agent writes no image: none to check
			if err := a.checkImage(ctx, loaded); err != nil {
				return err
			}
		}
	default:
		return invalidConfig("node %s: PrepareBoot cannot boot %q", node.UUID, in.Kind)
	}
	// The node's architecture has an agent and a loader, or the boot fails
	// here, before the machine is powered on (arch.go).
	agent, err := a.agentImages(loaded, in.Kind)
	if err != nil {
		return err
	}
	if node.VirtualMedia() {
		if hardware.BootOf(node.BootInterface).BootsURL() && node.BootMode != store.BootModeUEFI {
			return invalidConfig("node %s: boot interface %s boots over UEFI HTTP boot, which needs boot mode uefi; the node's boot mode is %s",
				node.UUID, node.BootInterface, node.BootMode)
		}
		if arch := NormalizeArch(cpuArch(loaded)); arch != ArchX8664 {
			return invalidConfig("node %s: cpu_arch %s: virtual media boots the x86_64 agent ISO only; boot this node over the network (boot interface ipxe or pxe)", node.UUID, arch)
		}
		return a.prepareVirtualMedia(ctx, node, in.Kind, loaded.NetworkData)
	}
	if len(node.MACs) == 0 {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("node %s has no port with pxe_enabled: create one with the MAC of its boot interface", node.UUID),
			workflows.ErrTypeInvalidConfig, nil)
	}
	// A new boot of the agent gets a new token on its first lookup: the
	// call's mark and the wipe of the previous session are one write. The
	// same call run again after a worker crash keeps the session: the agent
	// it booted may have looked up already (effects.go).
	if _, err := a.repeatedIn(ctx, loaded, keyAgentBootCall, store.AgentSessionKeys()); err != nil {
		return err
	}
	method, loader, err := a.netbootMethod(node, loaded) // httpboot.go
	if err != nil {
		return err
	}
	err = a.Store.PutBootConfig(ctx, &store.BootConfig{
		NodeUUID:     node.UUID,
		MACs:         node.MACs,
		BootMode:     node.BootMode,
		Method:       method,
		LoaderURL:    loader,
		KernelURL:    agent.KernelURL,
		InitrdURL:    agent.InitrdURL,
		KernelParams: a.agentKernelParams(node.UUID, a.bootParams(in.Kind, agent.KernelParams)),
		Kind:         store.BootKindAgent,
	})
	return storeErr(err, "store boot configuration of node %s", node.UUID)
}

// vmediaBootIF adds BOOTIF, in pxelinux's 01-aa-bb-... form, for the node's
// first PXE-enabled port: a machine booted from virtual media names its
// boot NIC as a network-booted one does (the agent's default route, the
// inventory's boot.pxe_interface, the NIC's PXE flag in plugin_data).
func vmediaBootIF(macs []string, params string) string {
	if len(macs) == 0 || strings.Contains(params, "BOOTIF=") {
		return params
	}
	return strings.TrimSpace(params + " BOOTIF=01-" + strings.ReplaceAll(strings.ToLower(macs[0]), ":", "-"))
}

// prepareVirtualMedia builds the node's agent ISO, with its network_data
// when it has some (Ironic's prepare_deploy_iso does the same), and
// inserts it through the BMC.
func (a *Activities) prepareVirtualMedia(ctx context.Context, node workflows.NodeInfo, kind workflows.BootKind, networkData map[string]any) error {
	if a.Config.VirtualMedia == nil {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("node %s boots from virtual media, but this worker has no virtual-media ISO service configured", node.UUID),
			workflows.ErrTypeInvalidConfig, nil)
	}
	token, err := store.NewAgentToken()
	if err != nil {
		return err
	}
	// Ironic's pre-generated token for virtual media: the agent reads it
	// from the ISO's command line, lookup then never hands one out.
	if err := a.Store.DeleteDriverInternalInfoKeys(ctx, node.UUID, store.KeyAgentURL, store.KeyAgentVerifyCA); err != nil {
		return storeErr(err, "wipe agent url of node %s", node.UUID)
	}
	if err := a.Store.MergeDriverInternalInfo(ctx, node.UUID, map[string]any{
		store.KeyAgentToken: token, store.KeyAgentTokenPregenerated: true,
	}); err != nil {
		return storeErr(err, "store agent token of node %s", node.UUID)
	}
	secure, err := a.secureBootOn(ctx, node.UUID) // activities/secureboot.go
	if err != nil {
		return err
	}
	var nd []byte
	if len(networkData) > 0 {
		if nd, err = json.MarshalIndent(networkData, "", "  "); err != nil {
			return invalidConfig("node %s: network_data: %v", node.UUID, err)
		}
	}
	isoURL, err := a.Config.VirtualMedia.BuildAgentISO(ctx, AgentISO{
		NodeUUID: node.UUID, APIURL: a.Config.APIURL, Token: token,
		KernelParams: strings.Join(a.agentExtraParams(node.UUID, vmediaBootIF(node.MACs, a.bootParams(kind, a.Config.AgentKernelParams))), " "),
		SecureBoot:   secure, NetworkData: nd,
	})
	if err != nil {
		return fmt.Errorf("build agent ISO for node %s: %w", node.UUID, err)
	}
	if err := a.Store.PutBootConfig(ctx, &store.BootConfig{
		NodeUUID: node.UUID, MACs: node.MACs, BootMode: node.BootMode, Method: store.BootMethodVMedia,
		ISOPath: isoURL, Kind: store.BootKindAgent,
	}); err != nil {
		return storeErr(err, "store boot configuration of node %s", node.UUID)
	}
	if hardware.BootOf(node.BootInterface).BootsURL() {
		// redfish-https: the BMC gives the firmware the ISO's URL when the
		// workflow sets boot device uefihttp (SetBootDevice).
		return nil
	}
	d, err := a.driver(ctx, node)
	if err != nil {
		return err
	}
	defer d.Close()
	return bmcErr(d.InsertMedia(ctx, isoURL), "insert agent ISO into node %s", node.UUID)
}

// CleanBoot removes what PrepareBoot set up: the boot configuration, and
// for virtual media the inserted ISO (after power off: ejecting under a
// running ramdisk can corrupt it). It removes whatever is in place, of any
// kind, whatever in.Kind says (see workflows.BootInput). Idempotent.
func (a *Activities) CleanBoot(ctx context.Context, in workflows.BootInput) error {
	node := in.Node
	point := "CleanBoot/" + string(in.Kind)
	crashPoint(ctx, node.UUID, point, "start")
	defer crashPoint(ctx, node.UUID, point, "after")
	if err := a.showStep(ctx, node.UUID, in.Starts); err != nil {
		return err
	}
	if node.VirtualMedia() {
		// A redfish-https node's ISO was never inserted.
		if !hardware.BootOf(node.BootInterface).BootsURL() {
			if err := a.ejectMedia(ctx, node); err != nil {
				return err
			}
		}
		if a.Config.VirtualMedia != nil {
			if err := a.Config.VirtualMedia.RemoveAgentISO(node.UUID); err != nil {
				a.Log.Warn("remove agent ISO", "node", node.UUID, "error", err)
			}
		}
	}
	return storeErr(a.Store.DeleteBootConfig(ctx, node.UUID), "remove boot configuration of node %s", node.UUID)
}

// ejectMedia ejects whatever the node's BMC has in its virtual CD.
func (a *Activities) ejectMedia(ctx context.Context, node workflows.NodeInfo) error {
	d, err := a.driver(ctx, node)
	if err != nil {
		return err
	}
	defer d.Close()
	return bmcErr(d.EjectMedia(ctx), "eject virtual media of node %s", node.UUID)
}

// prepareRamdisk sets up deploy_interface=ramdisk: the instance's own
// kernel and ramdisk (instance_info kernel, ramdisk,
// ramdisk_kernel_arguments) over the network, or its boot_iso as virtual
// media.
func (a *Activities) prepareRamdisk(ctx context.Context, node workflows.NodeInfo) error {
	n, err := a.Store.GetNode(ctx, node.UUID)
	if err != nil {
		return storeErr(err, "load node %s", node.UUID)
	}
	ii := n.InstanceInfo
	str := func(k string) string { v, _ := ii[k].(string); return v }
	if iso := str("boot_iso"); iso != "" {
		if !node.VirtualMedia() {
			return invalidConfig("node %s: instance_info boot_iso needs a virtual-media boot interface (redfish-virtual-media); for network boot give kernel and ramdisk", node.UUID)
		}
		if err := a.Store.PutBootConfig(ctx, &store.BootConfig{NodeUUID: node.UUID, MACs: node.MACs, BootMode: node.BootMode,
			Method: store.BootMethodVMedia, ISOPath: iso, Kind: store.BootKindRamdisk}); err != nil {
			return storeErr(err, "store boot configuration of node %s", node.UUID)
		}
		d, err := a.driver(ctx, node)
		if err != nil {
			return err
		}
		defer d.Close()
		return bmcErr(d.InsertMedia(ctx, iso), "insert boot_iso into node %s", node.UUID)
	}
	if str("kernel") == "" || str("ramdisk") == "" {
		return invalidConfig("node %s: deploy_interface ramdisk needs instance_info kernel and ramdisk (or boot_iso)", node.UUID)
	}
	if len(node.MACs) == 0 {
		return invalidConfig("node %s has no port with pxe_enabled: create one with the MAC of its boot interface", node.UUID)
	}
	err = a.Store.PutBootConfig(ctx, &store.BootConfig{
		NodeUUID: node.UUID, MACs: node.MACs, BootMode: node.BootMode, Method: store.BootMethodPXE,
		KernelURL: str("kernel"), InitrdURL: str("ramdisk"), KernelParams: str("ramdisk_kernel_arguments"), Kind: store.BootKindRamdisk,
	})
	return storeErr(err, "store boot configuration of node %s", node.UUID)
}

func invalidConfig(format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), workflows.ErrTypeInvalidConfig, nil)
}

// agentImages are the agent kernel, ramdisk and kernel parameters for a
// node: for a rescue, Ironic's driver_info rescue_kernel and
// rescue_ramdisk when set; Ironic's deploy_kernel and deploy_ramdisk when
// set; else the boot service's own agent of the node's cpu_arch, which
// must be one the worker is configured for (arch.go).
func (a *Activities) agentImages(n *store.Node, kind workflows.BootKind) (agentArch, error) {
	arch := NormalizeArch(cpuArch(n))
	table := a.Config.agentArchitectures()
	own, known := table[arch]
	pairs := [][2]string{{hardware.KeyDeployKernel, hardware.KeyDeployRamdisk}}
	if kind == workflows.BootRescue {
		pairs = append([][2]string{{hardware.KeyRescueKernel, hardware.KeyRescueRamdisk}}, pairs...)
	}
	for _, p := range pairs {
		k, _ := n.DriverInfo[p[0]].(string)
		r, _ := n.DriverInfo[p[1]].(string)
		switch {
		case k != "" && r != "":
			return agentArch{KernelURL: k, InitrdURL: r, KernelParams: own.KernelParams}, nil
		case k != "" || r != "":
			return agentArch{}, invalidConfig("node %s: driver_info %s and %s go together: set both or neither", n.UUID, p[0], p[1])
		}
	}
	if !known {
		return agentArch{}, invalidConfig("node %s: no agent or boot loader is configured for cpu_arch %s: this worker boots %s (worker setting --agent-architectures; docs/bmcs-and-boot.md, \"arm64\"), or set driver_info %s and %s",
			n.UUID, arch, archNames(table), hardware.KeyDeployKernel, hardware.KeyDeployRamdisk)
	}
	return own, nil
}

// cpuArch is the node's properties/cpu_arch ("" when unset).
func cpuArch(n *store.Node) string {
	s, _ := n.Properties["cpu_arch"].(string)
	return s
}
