package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/agent/client"
	"github.com/ironflow/ironflow/imagecache"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// agentFor connects to the agent that last heartbeated for the node, with
// the token and CA the store holds (never passed through workflow history).
func (a *Activities) agentFor(ctx context.Context, in workflows.AgentInput) (*client.Client, *store.Node, error) {
	var n *store.Node
	err := awaitStore(ctx, func() (err error) {
		n, err = a.Store.GetNode(ctx, in.NodeUUID)
		return err
	})
	if err != nil {
		return nil, nil, storeErr(err, "load node %s", in.NodeUUID)
	}
	url := in.CallbackURL
	if url == "" {
		url, _ = n.DriverInternalInfo[store.KeyAgentURL].(string)
	}
	if url == "" {
		return nil, nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("node %s has no agent: no heartbeat recorded a callback_url", n.UUID), workflows.ErrTypeAgentUnreachable, nil)
	}
	token, _ := n.DriverInternalInfo[store.KeyAgentToken].(string)
	var tlsOpts []client.Option
	ca, _ := n.DriverInternalInfo[store.KeyAgentVerifyCA].(string)
	insecure := false
	if ca != "" && !a.Config.AgentInsecure {
		tlsOpts = append(tlsOpts, client.WithCAPEM([]byte(ca)))
	} else if strings.HasPrefix(url, "https://") {
		tlsOpts = append(tlsOpts, client.WithInsecureTLS())
		insecure = true
	}
	hc, err := a.agents.get(url, token, ca, insecure, tlsOpts...)
	var c *client.Client
	if err == nil {
		c, err = client.New(url, token, client.WithTimeout(time.Minute), client.WithHTTPClient(hc))
	}
	if err != nil {
		return nil, nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("agent of node %s at %s: %v", n.UUID, url, err), workflows.ErrTypeInvalidConfig, err)
	}
	return c, n, nil
}

// portsOf lists the node's ports, which the agent's step calls carry (as
// Ironic's do).
func (a *Activities) portsOf(ctx context.Context, n *store.Node) ([]*store.Port, error) {
	ports, err := a.Store.ListPorts(ctx, store.PortFilter{NodeUUID: n.UUID})
	return ports, storeErr(err, "load ports of node %s", n.UUID)
}

// agentErr maps agent client failures: a failed command carries the
// agent's own words and is not retried (an operator decides); a busy or
// unreachable agent is retried.
func agentErr(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	var refused *temporal.ApplicationError
	if errors.As(err, &refused) && refused.NonRetryable() {
		return err // already says what is wrong (e.g. the node's image)
	}
	msg := fmt.Sprintf(format, args...) + ": " + err.Error()
	switch {
	case errors.Is(err, client.ErrCommandFailed):
		return temporal.NewNonRetryableApplicationError(msg, workflows.ErrTypeAgentStepFailed, err)
	case errors.Is(err, client.ErrUnauthorized):
		return temporal.NewNonRetryableApplicationError(msg, workflows.ErrTypeAgentStepFailed, err)
	}
	return temporal.NewApplicationError(msg, workflows.ErrTypeAgentUnreachable, err)
}

// agentNode is the node as the agent sees it in command parameters, with the
// secrets it needs (image URL, config drive) and nothing it does not.
func agentNode(n *store.Node) map[string]any {
	dii := map[string]any{}
	for k, v := range n.DriverInternalInfo {
		if k != store.KeyAgentToken {
			dii[k] = v
		}
	}
	return map[string]any{
		"uuid":                 n.UUID,
		"instance_info":        n.InstanceInfo,
		"driver_internal_info": dii,
		"properties":           n.Properties,
		"instance_uuid":        n.InstanceUUID,
		// The agent offers its software RAID steps to a node on the agent
		// raid interface and builds them from target_raid_config, as
		// Ironic's node dict gives IPA both (agent/raid.go).
		"raid_interface":     n.RAIDInterface,
		"target_raid_config": n.TargetRAIDConfig,
		// What create_configuration built: the deploy writes the image
		// onto its software RAID root volume (agent/raid_deploy.go).
		"raid_config": n.RAIDConfig,
	}
}

func agentPorts(ports []*store.Port) []map[string]any {
	out := make([]map[string]any, 0, len(ports))
	for _, p := range ports {
		out = append(out, map[string]any{"address": p.Address, "uuid": p.UUID, "pxe_enabled": p.PXEEnabled})
	}
	return out
}

// GetAgentSteps lists the agent's deploy, clean or service steps.
func (a *Activities) GetAgentSteps(ctx context.Context, in workflows.AgentStepsInput) ([]provision.Step, error) {
	crashPoint(ctx, in.Agent.NodeUUID, "GetAgentSteps", "start")
	defer keepAlive(ctx)()
	c, n, err := a.agentFor(ctx, in.Agent)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ports, err := a.portsOf(ctx, n)
	if err != nil {
		return nil, err
	}
	var list client.StepList
	switch in.Kind {
	case provision.StepKindClean:
		list, err = c.GetCleanSteps(ctx, agentNode(n), agentPorts(ports))
	case provision.StepKindService:
		list, err = c.GetServiceSteps(ctx, agentNode(n), agentPorts(ports))
	default:
		list, err = c.GetDeploySteps(ctx, agentNode(n), agentPorts(ports))
	}
	if err != nil {
		return nil, agentErr(err, "get %s steps from the agent of node %s", in.Kind, n.UUID)
	}
	out := make([]provision.Step, 0, len(list.Steps))
	for _, s := range list.Steps {
		out = append(out, provision.Step{StepID: provision.StepID{Interface: s.Interface, Step: s.Step}, Priority: s.Priority,
			RebootRequested: s.RebootRequested, Abortable: s.Abortable, ArgsInfo: argsInfo(s.ArgsInfo)})
	}
	crashPoint(ctx, in.Agent.NodeUUID, "GetAgentSteps", "after")
	return out, nil
}

// RunAgentStep runs one in-band step and follows it to the end, reporting
// progress as activity heartbeats. After a worker crash the retried activity
// finds the command it started (heartbeat details, or the agent's command
// list) and follows it instead of starting the step again, so an image is
// never written twice.
func (a *Activities) RunAgentStep(ctx context.Context, in workflows.AgentStepInput) (workflows.AgentStepResult, error) {
	ctx, endStep := startStepSpan(ctx, in.Kind, in.Step)
	res, err := a.runAgentStep(ctx, in)
	if err == nil && in.Step.Interface == "raid" {
		// The agent's software RAID steps (activities/raid_agent.go).
		err = a.recordAgentRAID(ctx, in, res)
	}
	endStep(err)
	return res, err
}

func (a *Activities) runAgentStep(ctx context.Context, in workflows.AgentStepInput) (workflows.AgentStepResult, error) {
	point := "RunAgentStep/" + in.Step.Step
	crashPoint(ctx, in.Agent.NodeUUID, point, "start")
	if err := a.showStep(ctx, in.Agent.NodeUUID, &provision.RunningStep{Kind: in.Kind, Step: in.Step, Index: in.Index}); err != nil {
		return workflows.AgentStepResult{}, err
	}
	c, n, err := a.agentFor(ctx, in.Agent)
	if err != nil {
		return workflows.AgentStepResult{}, err
	}
	defer c.Close()
	name := in.Step.Name()

	var beat struct {
		CommandID string `json:"command_id"`
		Progress  string `json:"progress"`
		// Step is the step's own progress (a burn-in's checkpoint): a
		// later attempt that finds the command lost hands it back.
		Step *workflows.StepProgress `json:"step_progress,omitempty"`
	}
	if activity.HasHeartbeatDetails(ctx) {
		_ = activity.GetHeartbeatDetails(ctx, &beat)
	}
	if beat.CommandID == "" {
		beat.CommandID = a.findCommand(ctx, c, in)
	}
	cmdSpan := startAgentCommandSpan(ctx, in.Step, time.Now())
	if beat.CommandID == "" {
		ports, err := a.portsOf(ctx, n)
		if err != nil {
			return workflows.AgentStepResult{}, err
		}
		res, err := a.startStep(ctx, c, n, ports, in)
		if err != nil {
			cmdSpan.end(res, err)
			return workflows.AgentStepResult{}, agentErr(err, "start %s on the agent of node %s", name, n.UUID)
		}
		if res.ID == "" {
			// Nothing to run in-band for this node (e.g. bootloader on BIOS).
			cmdSpan.end(client.CommandResult{CommandStatus: client.StatusSucceeded}, nil)
			return workflows.AgentStepResult{Status: client.StatusSucceeded}, nil
		}
		beat.CommandID = res.ID
		crashPoint(ctx, n.UUID, point, "after")
		if res.Done() {
			cmdSpan.end(res, nil)
			if err := res.Err(); err != nil {
				return workflows.AgentStepResult{}, agentErr(err, "%s on node %s", name, n.UUID)
			}
			crashPoint(ctx, n.UUID, point, "done")
			return workflows.AgentStepResult{CommandID: res.ID, Status: res.CommandStatus, Result: string(res.CommandResult)}, nil
		}
	}
	// No heartbeat right after the start: each one is a write of the
	// workflow's state on the Temporal server, and most steps end before
	// the first poll. A later attempt that finds no details finds the
	// command in the agent's list (findCommand). Heartbeat on a ticker, so
	// that a few failed polls of a busy agent do not look like a dead
	// worker, and with the progress of a step that runs longer.
	var mu sync.Mutex
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				mu.Lock()
				activity.RecordHeartbeat(ctx, beat)
				mu.Unlock()
			}
		}
	}()
	cached := in.Kind != provision.StepKindClean && in.Step.Step == "write_image" && imagecache.Cached(n.InstanceInfo)
	keep := a.stepProgressKeeper(n.UUID, in.Kind)
	res, err := c.WaitCommand(ctx, beat.CommandID, a.Config.AgentPollInterval, func(r client.CommandResult) {
		p, ok := r.Progress()
		if ok {
			cmdSpan.progressed(p)
		}
		if sp := stepProgress(p, ok); sp != nil {
			mu.Lock()
			beat.Step = sp
			beat.Progress = sp.Stage
			activity.RecordHeartbeat(ctx, beat)
			mu.Unlock()
			keep(ctx, sp)
		}
		if !cached || ok && p.BytesDownloaded > 0 {
			if ok {
				mu.Lock()
				beat.Progress = fmt.Sprintf("%d/%d bytes", p.BytesDownloaded, p.TotalBytes)
				activity.RecordHeartbeat(ctx, beat)
				mu.Unlock()
			}
			return
		}
		// The agent waits for its first byte while the boot service's
		// cache downloads the image: show that download.
		if cp, ok := a.cacheProgress(ctx, n); ok {
			mu.Lock()
			beat.Progress = cp
			activity.RecordHeartbeat(ctx, beat)
			mu.Unlock()
		}
	})
	cmdSpan.end(res, err)
	if errors.Is(err, client.ErrNotFound) {
		// The agent answers but does not know the command: the machine
		// rebooted under the step and a fresh agent called back. The
		// workflow runs the step again from what it published last.
		mu.Lock()
		lost := workflows.AgentCommandLost{CommandID: beat.CommandID, Progress: beat.Step}
		mu.Unlock()
		return workflows.AgentStepResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%s on node %s: the agent no longer knows command %s (the machine rebooted)", name, n.UUID, lost.CommandID),
			workflows.ErrTypeAgentCommandLost, err, lost)
	}
	if err != nil {
		return workflows.AgentStepResult{}, agentErr(err, "%s on node %s", name, n.UUID)
	}
	crashPoint(ctx, n.UUID, point, "done")
	return workflows.AgentStepResult{CommandID: res.ID, Status: res.CommandStatus, Result: string(res.CommandResult)}, nil
}

// stepProgress is the step's own progress in an agent's progress report (a
// burn-in's stage, fraction and checkpoint, an erase's stage); nil for an
// image download's byte counts, which the heartbeat's text shows.
func stepProgress(p client.Progress, ok bool) *workflows.StepProgress {
	if !ok || (p.Fraction == 0 && p.ElapsedSeconds == 0 && p.Checkpoint == nil) {
		return nil
	}
	sp := &workflows.StepProgress{Stage: p.Stage, Fraction: p.Fraction, ElapsedSeconds: p.ElapsedSeconds}
	if p.Checkpoint != nil {
		if raw, err := json.Marshal(p.Checkpoint); err == nil && len(raw) <= maxCheckpointBytes {
			sp.Checkpoint = raw
		}
	}
	return sp
}

// maxCheckpointBytes bounds a checkpoint kept on the node and in the
// workflow's history (a burn-in's is a few counts).
const maxCheckpointBytes = 4096

// stepProgressEvery is how often the running step's progress is written to
// the node: often enough to follow a burn-in, rarely enough not to load
// the database with one write per poll.
const stepProgressEvery = 5 * time.Second

// stepProgressKeeper writes a running step's progress into the node's
// driver_internal_info (workflows.StepProgressKey), at most every
// stepProgressEvery; a failed write is logged, the step goes on.
func (a *Activities) stepProgressKeeper(nodeUUID string, kind provision.StepKind) func(context.Context, *workflows.StepProgress) {
	var last time.Time
	return func(ctx context.Context, sp *workflows.StepProgress) {
		if time.Since(last) < stepProgressEvery {
			return
		}
		last = time.Now()
		view := map[string]any{"stage": sp.Stage, "fraction": sp.Fraction, "elapsed_seconds": sp.ElapsedSeconds,
			"updated_at": last.UTC().Format(time.RFC3339)}
		if len(sp.Checkpoint) > 0 {
			view["checkpoint"] = sp.Checkpoint
		}
		if err := a.Store.MergeDriverInternalInfo(ctx, nodeUUID, map[string]any{workflows.StepProgressKey(kind): view}); err != nil {
			activity.GetLogger(ctx).Warn("record step progress", "node", nodeUUID, "error", err)
		}
	}
}

// startStep issues the agent command for a step.
func (a *Activities) startStep(ctx context.Context, c *client.Client, n *store.Node, ports []*store.Port, in workflows.AgentStepInput) (client.CommandResult, error) {
	// Only the image's own steps ask Glance (a clean step must not fail
	// because the deployed image has gone from Glance since).
	var partition bool
	if in.Step.StepID == provision.StepPrepareInstanceBoot || in.Step.StepID == provision.StepWriteImage {
		var err error
		if partition, err = a.partitionImage(ctx, n); err != nil {
			return client.CommandResult{}, err
		}
	}
	if in.Step.StepID == provision.StepPrepareInstanceBoot {
		// A partition image has no boot code of its own: the agent
		// installs its bootloader, or says why it cannot, in either mode.
		if partition {
			return c.InstallBootloader(ctx, client.InstallBootloaderParams{TargetBootMode: explicitBootMode(n), SecureBoot: a.checkSignedLoader(ctx, n)})
		}
		if bootMode(n) != "uefi" {
			if softwareRAIDRoot(n) {
				// The agent answers for the md members (it refuses BIOS).
				return c.InstallBootloader(ctx, client.InstallBootloaderParams{TargetBootMode: bootMode(n)})
			}
			return client.CommandResult{}, nil
		}
		// With secure boot asked for, the agent refuses a loader the
		// firmware would refuse (agent/secureboot.go), before the deploy
		// turns secure boot on and boots the instance.
		return c.InstallBootloader(ctx, client.InstallBootloaderParams{TargetBootMode: "uefi", SecureBoot: a.checkSignedLoader(ctx, n)})
	}
	step := client.Step{Interface: in.Step.Interface, Step: in.Step.Step, Priority: in.Step.Priority}
	if len(in.Step.Args) > 0 {
		if err := json.Unmarshal(in.Step.Args, &step.Args); err != nil {
			return client.CommandResult{}, fmt.Errorf("step args: %w", err)
		}
	}
	if in.Step.StepID == provision.StepWriteImage && partition {
		step.Args = withPartitionImageInfo(step.Args, n)
	}
	if in.Step.StepID == provision.StepWriteImage && in.Kind != provision.StepKindClean {
		args, err := withImageTrust(step.Args, n)
		if err != nil {
			return client.CommandResult{}, err
		}
		step.Args = args
	}
	switch in.Kind {
	case provision.StepKindClean:
		return c.ExecuteCleanStep(ctx, step, agentNode(n), agentPorts(ports))
	case provision.StepKindService:
		return c.ExecuteServiceStep(ctx, step, agentNode(n), agentPorts(ports))
	}
	node, err := a.agentDeployNode(ctx, n)
	if err != nil {
		return client.CommandResult{}, err
	}
	return c.ExecuteDeployStep(ctx, step, node, agentPorts(ports))
}

// findCommand looks in the agent's command list for this step started by an
// earlier attempt of this activity.
func (a *Activities) findCommand(ctx context.Context, c *client.Client, in workflows.AgentStepInput) string {
	cmds, err := c.ListCommands(ctx)
	if err != nil {
		return ""
	}
	want := "deploy.execute_deploy_step"
	switch in.Kind {
	case provision.StepKindClean:
		want = "clean.execute_clean_step"
	case provision.StepKindService:
		want = "service.execute_service_step"
	}
	if in.Step.StepID == provision.StepPrepareInstanceBoot {
		want = "image.install_bootloader"
	}
	for i := len(cmds) - 1; i >= 0; i-- {
		cmd := cmds[i]
		if cmd.CommandName != want || cmd.CommandStatus == client.StatusFailed {
			continue
		}
		if want == "image.install_bootloader" {
			return cmd.ID
		}
		var p struct {
			Step client.Step `json:"step"`
		}
		if json.Unmarshal(cmd.CommandParams, &p) == nil && p.Step.Step == in.Step.Step {
			return cmd.ID
		}
	}
	return ""
}

// AgentPowerOff asks the agent to sync and power the machine off.
//
// A node whose agent token is already wiped has no agent to talk to: the
// workflow task that tore it down is being replayed (local activities run
// again when their task is retried), so there is nothing to do.
func (a *Activities) AgentPowerOff(ctx context.Context, in workflows.AgentInput) error {
	crashPoint(ctx, in.NodeUUID, "AgentPowerOff", "start")
	defer keepAlive(ctx)()
	if err := a.showStep(ctx, in.NodeUUID, in.Starts); err != nil {
		return err
	}
	c, n, err := a.agentFor(ctx, in)
	if err != nil {
		return err
	}
	defer c.Close()
	if tok, _ := n.DriverInternalInfo[store.KeyAgentToken].(string); tok == "" {
		return nil
	}
	if n.DisablePowerOff {
		// The machine must stay on: the agent locks itself down instead
		// (Ironic's agent_client lockdown), and the BMC reset that follows
		// boots what comes next (SetPower, withoutPowerOff).
		if err := c.Lockdown(ctx); err != nil {
			return agentErr(err, "lock down the agent of node %s", n.UUID)
		}
		a.waitAgentGone(ctx, c, n.UUID)
		crashPoint(ctx, n.UUID, "AgentPowerOff", "after")
		return nil
	}
	if err := c.Sync(ctx); err != nil {
		a.Log.Warn("agent sync before power off", "node", n.UUID, "error", err)
	}
	if err := c.PowerOff(ctx); err != nil {
		return agentErr(err, "power off node %s through its agent", n.UUID)
	}
	crashPoint(ctx, n.UUID, "AgentPowerOff", "after")
	return nil
}

// agentGoneTimeout bounds the wait for a locked-down agent to stop
// answering (Ironic waits post_deploy_get_power_state_retries times).
const agentGoneTimeout = 30 * time.Second

// waitAgentGone polls a locked-down agent until it no longer answers, as
// Ironic's lockdown does to know it took effect; an agent still answering
// at the deadline is logged, and the BMC reset that follows ends it anyway.
func (a *Activities) waitAgentGone(ctx context.Context, c *client.Client, node string) {
	deadline := time.Now().Add(agentGoneTimeout)
	for time.Now().Before(deadline) {
		if _, err := c.ListCommands(ctx); err != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(250 * time.Millisecond):
		}
	}
	a.Log.Warn("the agent still answers after its lockdown", "node", node, "waited", agentGoneTimeout)
}

// isPartitionImage tells whether the node deploys a partition image
// (instance_info/image_type, Ironic's).
func isPartitionImage(n *store.Node) bool {
	t, _ := n.InstanceInfo["image_type"].(string)
	return t == "partition"
}

// withPartitionImageInfo adds to write_image's args the image_info keys of
// a partition image, as Ironic's agent deploy passes them to IPA: root_mb,
// swap_mb, ephemeral_mb, ephemeral_format, preserve_ephemeral, boot_mode
// (the node's when it is known, which the agent cannot see otherwise;
// unknown, the agent takes the mode its firmware booted in) and disk_label. Keys
// the args already carry win.
func withPartitionImageInfo(args map[string]any, n *store.Node) map[string]any {
	if args == nil {
		args = map[string]any{}
	}
	info, _ := args["image_info"].(map[string]any)
	if info == nil {
		info = map[string]any{}
	}
	set := func(k string, v any) {
		if _, ok := info[k]; !ok && v != nil {
			info[k] = v
		}
	}
	ii := n.InstanceInfo
	mb := func(key string, scale float64) any {
		switch v := ii[key].(type) {
		case float64:
			return int64(v * scale)
		case string:
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				return int64(f * scale)
			}
		}
		return nil
	}
	set("image_type", "partition")
	set("root_mb", mb("root_gb", 1024))
	set("swap_mb", mb("swap_mb", 1))
	set("ephemeral_mb", mb("ephemeral_gb", 1024))
	set("ephemeral_format", ii["ephemeral_format"])
	set("preserve_ephemeral", ii["preserve_ephemeral"])
	if m := explicitBootMode(n); m != "" {
		set("boot_mode", m)
	}
	caps, _ := ii["capabilities"].(map[string]any)
	if text, ok := ii["capabilities"].(string); ok {
		_ = json.Unmarshal([]byte(text), &caps)
	}
	set("disk_label", caps["disk_label"])
	args["image_info"] = info
	return args
}

// explicitBootMode is bootMode when something names the node's boot mode,
// "" when bootMode would only fall back to its default.
func explicitBootMode(n *store.Node) string {
	caps, _ := n.Properties["capabilities"].(string)
	_, dbm := n.InstanceInfo["deploy_boot_mode"]
	_, ic := n.InstanceInfo["capabilities"]
	if (n.BootMode != nil && *n.BootMode != "") || dbm || ic || strings.Contains(caps, "boot_mode") {
		return bootMode(n)
	}
	return ""
}
