package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/configdrive"
	"github.com/ironflow/ironflow/crashhook"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/pyliteral"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// verbSince are the microversions that introduced provision verbs; a verb
// used below its version is 406, as Ironic's MIN_VERB_VERSIONS.
var verbSince = map[provision.Verb]int{
	provision.VerbManage: v4ManageableState, provision.VerbProvide: v4ManageableState,
	provision.VerbInspect: v6InspectState, provision.VerbAbort: v13AbortVerb, provision.VerbClean: v15ManualClean,
	provision.VerbDeploy: v73DeployVerbs, provision.VerbUndeploy: v73DeployVerbs,
	provision.VerbRescue: v38RescueIface, provision.VerbUnrescue: v38RescueIface,
	provision.VerbUnhold: v85UnholdVerb, provision.VerbService: v87Service,
	provision.VerbAdopt: v17AdoptVerb,
}

// deploysImage reports whether verb writes an instance: the verbs that take
// a config drive and deploy steps.
func deploysImage(verb provision.Verb) bool {
	switch verb {
	case provision.VerbActive, provision.VerbDeploy, provision.VerbRebuild:
		return true
	}
	return false
}

// provisionArgs are the keys PUT .../states/provision accepts.
var provisionArgs = map[string]bool{
	"target": true, "configdrive": true, "clean_steps": true, "deploy_steps": true,
	"disable_ramdisk": true, "rescue_password": true, "service_steps": true, "runbook": true,
}

func stepsArg(body map[string]any, key string) (json.RawMessage, error) {
	v, ok := body[key]
	if !ok || v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, badRequest("Invalid %s: %s is not of type 'array'", key, pyliteral.Repr(v))
	}
	for _, item := range list {
		step, ok := item.(map[string]any)
		if !ok {
			return nil, badRequest("Invalid %s: %s is not of type 'object'", key, pyliteral.Repr(item))
		}
		for _, req := range []string{"interface", "step"} {
			if s, ok := step[req].(string); !ok || s == "" {
				return nil, badRequest("Invalid %s: '%s' is a required property", key, req)
			}
		}
	}
	raw, err := json.Marshal(normalizeNumbers(v))
	if err != nil {
		return nil, badRequest("Invalid %s: %s", key, err.Error())
	}
	return raw, nil
}

func configDriveArg(c *gin.Context, body map[string]any, verb provision.Verb) (json.RawMessage, error) {
	v, ok := body["configdrive"]
	if !ok || v == nil || v == "" {
		return nil, nil
	}
	if !deploysImage(verb) {
		return nil, badRequest("Adding a config drive is only supported when setting provision state to active, rebuild")
	}
	switch t := v.(type) {
	case string:
	case map[string]any:
		if ver(c) < v56BuildConfigdrive {
			return nil, badRequest("Providing a JSON object for configdrive is only supported starting with API version 1.%d", v56BuildConfigdrive)
		}
		for k := range t {
			switch k {
			case "meta_data", "network_data", "user_data":
			case "vendor_data":
				if ver(c) < v59VendorData {
					return nil, badRequest("Providing vendor_data in configdrive is only supported starting with API version 1.%d", v59VendorData)
				}
			default:
				return nil, badRequest("Invalid configdrive format: %s", additionalProps([]string{k}).Error())
			}
		}
		for _, k := range []string{"meta_data", "network_data", "vendor_data"} {
			if e, ok := t[k]; ok && e != nil {
				if _, ok := e.(map[string]any); !ok {
					return nil, badRequest("Invalid configdrive format: %s is not of type 'object'", pyliteral.Repr(e))
				}
			}
		}
	default:
		return nil, badRequest("Invalid configdrive format: %s is not valid under any of the given schemas", pyliteral.Repr(v))
	}
	raw, err := json.Marshal(normalizeNumbers(v))
	if err != nil {
		return nil, badRequest("Invalid configdrive format: %s", err.Error())
	}
	return raw, nil
}

// provision answers PUT /v1/nodes/{id}/states/provision in three steps:
// parse the body (no node needed), decide what the verb does in the node's
// state (decideProvision, a pure function), act (signal or start the
// workflow and record the transition). A verb that loses a race, to
// another verb or to a workflow that still holds the node, reads the node
// again and is decided afresh, as Ironic's conductor decides under the
// node lock (node_locked_retry_attempts): only one of verbs sent together
// is accepted from a state.
func (s *server) provision(c *gin.Context) error {
	req, err := parseProvision(c)
	if err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		n, err := s.loadNode(c, c.Param("node"))
		if err != nil {
			return err
		}
		// Aborting a deploy in wait call-back came with 1.110 (Ironic's
		// allow_deploy_abort): 406 below it.
		if req.verb == provision.VerbAbort && n.ProvisionState == provision.DeployWait && ver(c) < v110DeployWaitAbort {
			return notAcceptable()
		}
		plan, err := decideProvision(n, req.verb, func() bool {
			running, err := s.eng.Running(c.Request.Context(), n.UUID)
			return err == nil && running
		})
		if err != nil {
			return err
		}
		if err := checkRescueArgs(n, req); err != nil {
			return err
		}
		act, err := s.resolveSteps(c.Request.Context(), n, req) // deploy templates, runbooks: steps_resolve.go
		if err != nil {
			return err
		}
		// A runbook's steps are checked as the user's would be.
		if err := checkSteps(n, act); err != nil {
			return err
		}
		err = s.actProvision(c, n, act, plan)
		if err == nil {
			s.automaticLessee(c, n.UUID, req.verb) // keystone strategy: policy_view.go
			return nil
		}
		if !errors.Is(err, errLostRace) {
			return err
		}
		if attempt >= nodeLockedRetryAttempts {
			return nodeLocked(n.UUID, lockHolder(n))
		}
		if err := s.waitLock(c.Request.Context(), n.UUID); err != nil {
			return err
		}
	}
}

// waitLock waits before a verb is decided again: until the workflow that
// holds the node closes, at most nodeLockedRetryInterval. The holder is
// most often the workflow that has just recorded the state the verb starts
// from, a few milliseconds from its close: waiting for the close rather
// than the whole interval takes a deploy sent right after "available" from
// 1 s to a few ms (the bench's latency part).
func (s *server) waitLock(ctx context.Context, nodeUUID string) error {
	if w, ok := s.eng.(closeWaiter); ok {
		w.WaitClosed(ctx, nodeUUID, nodeLockedRetryInterval)
		return ctx.Err()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(nodeLockedRetryInterval):
		return nil
	}
}

// errLostRace: the node was held or moved between reading it and acting on
// it; provision reads it again and decides afresh.
var errLostRace = errors.New("node held or moved by another request")

// provisionBody is a parsed PUT .../states/provision body.
type provisionBody struct {
	verb        provision.Verb
	configDrive json.RawMessage
	// storedConfigDrive is what the node keeps in instance_info.configdrive
	// for configDrive: the API stores it before the workflow starts, so
	// that neither the drive nor its secrets enter the workflow's history.
	storedConfigDrive string
	cleanSteps        json.RawMessage
	serviceSteps      json.RawMessage // API 1.87
	deploySteps       json.RawMessage
	disableRamdisk    bool
	runbook           string // a runbook's UUID or name (API 1.92): steps_resolve.go
	minor             int    // the request's version: how a runbook is approved (1.112)
	// rescuePassword is the clear rescue_password (API 1.38); it is hashed
	// before anything stores it, and never logged.
	rescuePassword *string
}

// parseProvision reads and checks the body with Ironic's messages and
// version gates, in Ironic's order.
func parseProvision(c *gin.Context) (provisionBody, error) {
	var req provisionBody
	body, err := decodeObject(c)
	if err != nil {
		return req, err
	}
	for k := range body {
		if !provisionArgs[k] {
			return req, badRequest("Unknown argument: \"%s\"", k)
		}
	}
	tv, ok := body["target"]
	if !ok || tv == nil {
		return req, badRequest("Missing argument: \"target\"")
	}
	target, ok := tv.(string)
	if !ok {
		return req, badRequest("Invalid target: %s is not a string", pyliteral.Repr(tv))
	}
	verb := provision.ParseVerb(target)
	req.verb = verb
	req.minor = ver(c)
	if since, ok := verbSince[verb]; ok && ver(c) < since {
		return req, notAcceptable()
	}
	if req.configDrive, err = configDriveArg(c, body, verb); err != nil {
		return req, err
	}
	if req.configDrive != nil {
		if req.storedConfigDrive, err = configdrive.ForInstanceInfo(req.configDrive); errors.Is(err, configdrive.ErrTooLarge) {
			return req, errorf(http.StatusRequestEntityTooLarge, "Invalid configdrive format: the config drive is larger than %d bytes", configdrive.MaxSize)
		} else if err != nil {
			return req, badRequest("Invalid configdrive format: %s", err.Error())
		}
	}
	if req.cleanSteps, err = stepsArg(body, "clean_steps"); err != nil {
		return req, err
	}
	if req.serviceSteps, err = stepsArg(body, "service_steps"); err != nil {
		return req, err
	}
	if req.serviceSteps != nil && ver(c) < v87Service {
		return req, notAcceptable()
	}
	given := req.cleanSteps
	if given == nil {
		given = req.serviceSteps
	}
	if req.runbook, err = runbookArg(c, body, verb, given); err != nil {
		return req, err
	}
	if verb == provision.VerbService && req.serviceSteps == nil && req.runbook == "" {
		return req, badRequest("\"service_steps\" is required when setting target provision state to service")
	}
	if req.serviceSteps != nil && verb != provision.VerbService {
		return req, badRequest("\"service_steps\" is only valid when setting target provision state to service")
	}
	if verb == provision.VerbClean && req.cleanSteps == nil && req.runbook == "" {
		return req, badRequest("\"clean_steps\" is required when setting target provision state to clean")
	}
	if req.cleanSteps != nil && verb != provision.VerbClean {
		return req, badRequest("\"clean_steps\" is only valid when setting target provision state to clean or service")
	}
	if req.deploySteps, err = stepsArg(body, "deploy_steps"); err != nil {
		return req, err
	}
	if req.deploySteps != nil {
		if ver(c) < v69DeploySteps {
			return req, notAcceptable()
		}
		if !deploysImage(verb) {
			return req, badRequest("\"deploy_steps\" is only valid when setting target provision state to active or rebuild")
		}
	}
	if v, ok := body["rescue_password"]; ok && v != nil {
		pw, ok := v.(string)
		if !ok {
			return req, badRequest("Invalid rescue_password: %s is not a string", pyliteral.Repr(v))
		}
		req.rescuePassword = &pw
	}
	if v, ok := body["disable_ramdisk"]; ok && v != nil {
		if ver(c) < v70DisableRamdisk {
			return req, notAcceptable()
		}
		// Servicing takes it from 1.108 (Ironic's check_allow_disable_ramdisk).
		if verb == provision.VerbService && ver(c) < v108ServiceDisableRamdisk {
			return req, errorf(http.StatusNotAcceptable, "disable_ramdisk is not acceptable in this API version")
		}
		if req.disableRamdisk, err = boolValue(v); err != nil {
			return req, badRequest("Invalid disable_ramdisk: %s", err.Error())
		}
		if req.disableRamdisk && verb != provision.VerbClean && verb != provision.VerbService {
			return req, badRequest("\"disable_ramdisk\" is only valid when setting target provision state to clean or service")
		}
	}
	return req, nil
}

// provisionPlan is what an accepted verb does.
type provisionPlan struct {
	transition provision.Transition
	// abort: signal the running workflow to abort; nothing is started.
	abort bool
	// endWaitingFirst: the node is in a failure state, whose workflow may
	// wait for retry, skip-step or abort and hold the node. A new verb
	// (undeploy, rebuild, manage) is the operator's answer: that workflow
	// is aborted before the verb's starts.
	endWaitingFirst bool
}

// decideProvision decides what verb does to n: the plan, or Ironic's
// refusal. held reports whether a workflow holds the node; it is asked
// only when the state refuses the verb, since Ironic takes the node lock
// before it checks the state: a verb that races a running operation is
// told the node is locked.
func decideProvision(n *store.Node, verb provision.Verb, held func() bool) (provisionPlan, error) {
	op, checked := maintenanceRefuses[verb]
	if checked && op.beforeState && n.Maintenance {
		return provisionPlan{}, inMaintenance(op.name, n.UUID)
	}
	t, ok := provision.Accept(n.ProvisionState, verb)
	if !ok {
		if verb != provision.VerbAbort && held() {
			return provisionPlan{}, nodeLocked(n.UUID, lockHolder(n))
		}
		return provisionPlan{}, badRequest("%s", provision.NotAllowed(verb, n.UUID, n.ProvisionState))
	}
	if checked && !op.beforeState && n.Maintenance {
		return provisionPlan{}, inMaintenance(op.name, n.UUID)
	}
	if n.Protected && slices.Contains([]provision.Verb{provision.VerbDeleted, provision.VerbUndeploy, provision.VerbRebuild}, verb) {
		return provisionPlan{}, errorf(http.StatusForbidden, "Node %s is protected and cannot be undeployed, rebuilt or deleted", n.UUID)
	}
	if deploysImage(verb) {
		// Ironic's start_deploy validates the instance traits (400).
		if msg := instanceTraitsProblem(n); msg != "" {
			return provisionPlan{}, badRequest("Failed to validate deploy or power info for node %s: %s", n.UUID, msg)
		}
	}
	if t.Operation == provision.OpAbort {
		return provisionPlan{transition: t, abort: true}, nil
	}
	return provisionPlan{transition: t, endWaitingFirst: n.ProvisionState.Failed()}, nil
}

// maintenanceRefuses are the verbs Ironic refuses on a node in maintenance,
// with the operation its NodeInMaintenance message names. Ironic's API
// refuses active and rebuild (deploy is active since 1.73) before it looks
// at the state; its conductor refuses clean, rescue and unrescue once the
// state machine accepted the verb. Every other verb (manage, provide,
// inspect, deleted/undeploy, abort, ...) is allowed in maintenance.
var maintenanceRefuses = map[provision.Verb]struct {
	name        string
	beforeState bool
}{
	provision.VerbActive:  {"provisioning", true},
	provision.VerbDeploy:  {"provisioning", true},
	provision.VerbRebuild: {"provisioning", true},
	provision.VerbClean:   {"cleaning", false},
	"rescue":              {"rescuing", false},
	"unrescue":            {"unrescuing", false},
}

// inMaintenance is Ironic's NodeInMaintenance (400).
func inMaintenance(op, nodeUUID string) *apiError {
	return badRequest("The %s operation can't be performed on node %s because it's in maintenance mode.", op, nodeUUID)
}

// actProvision carries the plan out and answers 202.
func (s *server) actProvision(c *gin.Context, n *store.Node, req provisionBody, plan provisionPlan) error {
	location := s.baseURL(c) + "/v1/nodes/" + n.UUID + "/states"
	ctx := c.Request.Context()
	verb, t := req.verb, plan.transition

	if plan.abort {
		err := s.eng.Signal(ctx, n.UUID, workflows.SignalAbort, nil)
		if errors.Is(err, ErrNoWorkflow) {
			return badRequest("%s", provision.NotAllowed(verb, n.UUID, n.ProvisionState))
		}
		if err != nil {
			return fmt.Errorf("signal abort to node %s: %w", n.UUID, err)
		}
		s.addHistory(c, n.UUID, store.SeverityInfo, "provisioning", fmt.Sprintf("Abort requested in state \"%s\"", n.ProvisionState))
		writeEmpty(c, http.StatusAccepted, location)
		return nil
	}
	if t.Operation == provision.OpUnhold {
		return s.unhold(c, n, verb, location) // nodes_unhold.go
	}
	if plan.endWaitingFirst {
		if err := s.abortWaiting(ctx, n.UUID, provision.AbortRequest{SupersededBy: verb}); err != nil {
			return err
		}
	}
	if _, ok := workflows.WorkflowFor(t.Operation); !ok {
		return badRequest("The requested action \"%s\" is not supported by ironflow yet.", verb)
	}
	// A workflow that has just recorded the node's state may still be
	// finishing: it holds the node until it ends. From a settled state
	// (provision.State.Settled) it writes the node no more, so the check
	// is the start's own: startProvision retries a start refused while it
	// closes, keeping the transition. The check is a Temporal describe of
	// the node's earlier run, the dearest call of a verb (the README's
	// "Against Temporal's ceiling").
	if n.ProvisionState.Settled() {
		if err := s.requireEngine(ctx); err != nil {
			return err
		}
	} else {
		if running, err := s.eng.Running(ctx, n.UUID); err != nil {
			return fmt.Errorf("read the lock of node %s: %w", n.UUID, err)
		} else if running {
			return errLostRace
		}
	}
	// The state check and the state change are one conditional write: of
	// verbs that read the same state, one moves the node on and the others
	// are decided again against the state it moved to. The workflow
	// starts after this write and its first write is conditional on t.Next.
	var target *provision.State
	if t.Target != "" {
		target = &t.Target
	}
	event := provision.AcceptedEvent(verb, n.ProvisionState, t)
	err := s.store.RecordTransition(ctx, n.UUID, store.Transition{
		From: []provision.State{n.ProvisionState}, To: t.Next, Target: target,
		History: store.HistoryEvent{Severity: store.SeverityInfo, EventType: "provisioning", Event: event,
			Conductor: s.cfg.ConductorName, User: c.GetString(ctxUser), Project: requestProject(c)},
	})
	switch {
	case errors.Is(err, store.ErrStateConflict):
		return errLostRace
	case errors.Is(err, store.ErrNotFound):
		return nodeNotFound(n.UUID)
	case err != nil:
		return fmt.Errorf("record provision state of node %s: %w", n.UUID, err)
	}
	if req.configDrive != nil {
		_, err = s.store.UpdateNode(ctx, n.UUID, func(n *store.Node) error {
			if n.InstanceInfo == nil {
				n.InstanceInfo = map[string]any{}
			}
			n.InstanceInfo["configdrive"] = req.storedConfigDrive
			return nil
		})
		if err != nil {
			s.revertTransition(c, n, verb, t, err)
			return fmt.Errorf("store the config drive of node %s: %w", n.UUID, err)
		}
	}
	// The rescue password's hash, after the waiting workflow ended (it
	// forgets an earlier one) and before the new one starts.
	if err := s.storeRescuePassword(ctx, n.UUID, req); err != nil {
		s.revertTransition(c, n, verb, t, err)
		return err
	}
	// A test may kill the API here, its state written and no workflow
	// started (crashhook): the reconciler mends that node.
	crashhook.Point(ctx, n.UUID, "StartWorkflow/"+string(t.Next), "start")
	// The request carries no config drive: DeployNode finds it with the
	// node (provision.Request.ConfigDrive is for histories recorded before).
	err = s.startProvision(ctx, n.UUID, t.Next, provision.Request{
		NodeUUID: n.UUID, Verb: verb, FromState: n.ProvisionState, Transition: t,
		DeploySteps: req.deploySteps, CleanSteps: req.cleanSteps, ServiceSteps: req.serviceSteps,
		DisableRamdisk: req.disableRamdisk, ConductorGroup: n.ConductorGroup,
		RequestedAt: time.Now().UTC(), Rollout: c.GetString(ctxRollout),
	})
	if err != nil {
		s.revertTransition(c, n, verb, t, err)
		if req.rescuePassword != nil {
			s.forgetRescuePassword(ctx, n.UUID)
		}
	}
	if errors.Is(err, ErrNodeLocked) {
		return nodeLocked(n.UUID, lockHolder(n))
	}
	if errors.Is(err, ErrNotImplemented) {
		return badRequest("The requested action \"%s\" is not supported by ironflow yet.", verb)
	}
	if err != nil {
		return fmt.Errorf("start %s workflow for node %s: %w", t.Operation, n.UUID, err)
	}
	writeEmpty(c, http.StatusAccepted, location)
	return nil
}

// revertTransition puts the node back in the state the verb was accepted
// in when its workflow could not start, unless something else has moved it
// on since.
func (s *server) revertTransition(c *gin.Context, n *store.Node, verb provision.Verb, t provision.Transition, cause error) {
	event := fmt.Sprintf("Provision action \"%s\" not started (%v); back to state \"%s\"", verb, cause, n.ProvisionState)
	err := s.store.RecordTransition(context.WithoutCancel(c.Request.Context()), n.UUID, store.Transition{
		From: []provision.State{t.Next}, To: n.ProvisionState, Target: n.TargetProvisionState, LastError: n.LastError,
		History: store.HistoryEvent{Severity: store.SeverityInfo, EventType: "provisioning", Event: event,
			Conductor: s.cfg.ConductorName, User: c.GetString(ctxUser), Project: requestProject(c)},
	})
	if err != nil {
		s.log.WarnContext(c.Request.Context(), "revert the provision state of a verb whose workflow did not start", "node", n.UUID, "verb", verb, "err", err)
	}
}

// Ironic's [conductor]node_locked_retry_attempts and _interval.
const (
	nodeLockedRetryAttempts = 3
	nodeLockedRetryInterval = time.Second
)

// closeWaiter is an Engine that can wait for the node's running workflow
// to close (TemporalEngine).
type closeWaiter interface {
	WaitClosed(ctx context.Context, nodeUUID string, d time.Duration)
}

// startProvision starts the verb's workflow once the API recorded state
// next. As Ironic's node_locked_retry_attempts, a start refused because
// the node is locked is retried (a power or boot-device change may hold
// it), as long as the node is still in next.
func (s *server) startProvision(ctx context.Context, nodeUUID string, next provision.State, req provision.Request) error {
	for attempt := 1; ; attempt++ {
		err := s.eng.StartProvision(ctx, req)
		if !errors.Is(err, ErrNodeLocked) || attempt >= nodeLockedRetryAttempts {
			return err
		}
		if s.waitLock(ctx, nodeUUID) != nil {
			return err
		}
		if n, gerr := s.store.GetNode(ctx, nodeUUID); gerr != nil || n.ProvisionState != next {
			return err
		}
	}
}

// abortWaitTimeout bounds how long a verb waits for a failed workflow to
// end after abort.
const abortWaitTimeout = 15 * time.Second

// abortWaiting ends the workflow that waits for an operator on a failed
// node, if there is one, and waits until it is gone. The abort names the
// request that ended the wait (provision.AbortRequest: a verb, a power
// action, the node's deletion): the workflow keeps the failure's last_error
// and records that request ended its wait, not that an operator aborted.
// Failed states are resting states in Ironic: whatever Ironic accepts there
// ends the wait rather than finding the node locked.
func (s *server) abortWaiting(ctx context.Context, nodeUUID string, why provision.AbortRequest) error {
	running, err := s.eng.Running(ctx, nodeUUID)
	if err != nil || !running {
		return nil
	}
	if err := s.eng.Signal(ctx, nodeUUID, workflows.SignalAbort, why); err != nil && !errors.Is(err, ErrNoWorkflow) {
		return fmt.Errorf("abort the waiting workflow of node %s: %w", nodeUUID, err)
	}
	deadline := time.Now().Add(abortWaitTimeout)
	for time.Now().Before(deadline) {
		if running, err := s.eng.Running(ctx, nodeUUID); err == nil && !running {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nodeLocked(nodeUUID, "its workflow, which did not end within "+abortWaitTimeout.String()+" of abort")
}
