package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/provision"
)

// hardwareCalls are a run's calls to the node's hardware: BMC and boot
// activities on the node's conductor-group queue, with the BMC retry
// policy. node is the run's node: its policy and queue, and the power
// state the last power action left.
type hardwareCalls struct {
	ctx  workflow.Context
	node *NodeInfo
}

// call runs a BMC activity on the node's conductor-group queue (or as a
// local activity for fake-hardware, which has no network to reach), with the
// BMC retry policy: transient failures back off and retry, authentication and
// unsupported-operation failures stop at once.
func (h *hardwareCalls) call(name string, in, out any) error {
	p := h.node.Policy
	retry := &temporal.RetryPolicy{
		InitialInterval:        p.BMCInitialInterval,
		BackoffCoefficient:     2,
		MaximumInterval:        time.Minute,
		MaximumAttempts:        p.BMCAttempts,
		NonRetryableErrorTypes: []string{ErrTypeBMCAuth, ErrTypeBMCUnsupported, ErrTypeInvalidConfig, ErrTypeNodeGone},
	}
	if p.LocalBMC {
		ctx := workflow.WithLocalActivityOptions(h.ctx, workflow.LocalActivityOptions{
			StartToCloseTimeout: p.BMCCallTimeout,
			RetryPolicy:         retry,
		})
		return workflow.ExecuteLocalActivity(ctx, name, in).Get(ctx, out)
	}
	// The heartbeat timeout hands the attempt of a worker that died to
	// another in its length rather than the call's whole timeout (a BMC
	// that hangs holds a call to its deadline, and a power action with a
	// timeout may wait minutes); histories recorded without it replay, as
	// activity timeouts are not compared.
	ctx := workflow.WithActivityOptions(h.ctx, workflow.ActivityOptions{
		TaskQueue:           HardwareQueue(h.node.ConductorGroup),
		StartToCloseTimeout: p.BMCCallTimeout,
		HeartbeatTimeout:    p.AgentActivityHeartbeat,
		RetryPolicy:         retry,
	})
	return workflow.ExecuteActivity(ctx, name, in).Get(ctx, out)
}

// power runs a power action and keeps the state the BMC reports.
func (h *hardwareCalls) power(action string) error {
	var state string
	if err := h.call(ActSetPower, PowerInput{Node: *h.node, Action: action}, &state); err != nil {
		return err
	}
	h.node.PowerState = state
	return nil
}

func (h *hardwareCalls) bootDevice(device string, persistent bool) error {
	return h.call(ActSetBootDevice, BootDeviceInput{Node: *h.node, Device: device, Persistent: persistent}, nil)
}

// cleanBoot removes the boot configuration of kind; starts is the step it
// begins (nil for none).
func (h *hardwareCalls) cleanBoot(kind BootKind, starts *provision.RunningStep) error {
	return h.call(ActCleanBoot, BootInput{Node: *h.node, Kind: kind, Starts: starts}, nil)
}

// prepareBoot prepares what the machine is to boot from ironflow (PXE
// config or virtual-media ISO); starts is the step it begins (nil for none).
func (h *hardwareCalls) prepareBoot(kind BootKind, starts *provision.RunningStep) error {
	return h.call(ActPrepareBoot, BootInput{Node: *h.node, Kind: kind, Starts: starts}, nil)
}

// netbootDevice is how the node boots what ironflow serves it: the
// network, the virtual CD, or the ISO's URL by UEFI HTTP boot
// (redfish-https: the activity gives the BMC the URL). The last is new in
// 0.2.0, for a boot interface no earlier release had, so histories of
// other nodes record the same devices as before.
func (h *hardwareCalls) netbootDevice() string {
	switch b := hardware.BootOf(h.node.BootInterface); {
	case b.BootsURL():
		return BootDeviceUefiHTTP
	case b.VirtualMedia():
		return "cdrom"
	}
	return "pxe"
}

// BootDeviceUefiHTTP is the boot device of a redfish-https node's netboot:
// UEFI HTTP boot of the URL its boot configuration holds.
const BootDeviceUefiHTTP = "uefihttp"

// netboot prepares what the machine is to boot from ironflow (starts is the
// step the preparation begins, nil for none), points its next boot (or
// every boot) at the network or the virtual CD, and powers it on or
// reboots it.
func (h *hardwareCalls) netboot(kind BootKind, persistent bool, starts *provision.RunningStep) error {
	if err := h.prepareBoot(kind, starts); err != nil {
		return err
	}
	if err := h.bootDevice(h.netbootDevice(), persistent); err != nil {
		return err
	}
	return h.power("rebooting")
}

// bootAgent prepares the agent's boot (PXE config or virtual-media ISO),
// points the next boot at it and powers the machine on (or reboots it).
func (r *run) bootAgent() error { return r.netboot(BootAgent, false) }

// netboot is hardwareCalls.netboot begun by the running step, if any.
func (r *run) netboot(kind BootKind, persistent bool) error {
	return r.hw.netboot(kind, persistent, r.running())
}
