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

	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// verbSince are the microversions that introduced provision verbs; a verb
// used below its version is 406, as Ironic's MIN_VERB_VERSIONS.
var verbSince = map[string]int{
	"manage": v4ManageableState, "provide": v4ManageableState, "inspect": v6InspectState,
	"abort": v13AbortVerb, "clean": v15ManualClean,
	"deploy": v73DeployVerbs, "undeploy": v73DeployVerbs,
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
		return nil, badRequest("Invalid %s: %s is not of type 'array'", key, pyRepr(v))
	}
	for _, item := range list {
		step, ok := item.(map[string]any)
		if !ok {
			return nil, badRequest("Invalid %s: %s is not of type 'object'", key, pyRepr(item))
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

func configDriveArg(c *gin.Context, body map[string]any, verb string) (json.RawMessage, error) {
	v, ok := body["configdrive"]
	if !ok || v == nil || v == "" {
		return nil, nil
	}
	if verb != "active" && verb != "deploy" && verb != "rebuild" {
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
					return nil, badRequest("Invalid configdrive format: %s is not of type 'object'", pyRepr(e))
				}
			}
		}
	default:
		return nil, badRequest("Invalid configdrive format: %s is not valid under any of the given schemas", pyRepr(v))
	}
	raw, err := json.Marshal(normalizeNumbers(v))
	if err != nil {
		return nil, badRequest("Invalid configdrive format: %s", err.Error())
	}
	return raw, nil
}

// provision answers PUT /v1/nodes/{id}/states/provision.
func (s *server) provision(c *gin.Context) error {
	body, err := decodeObject(c)
	if err != nil {
		return err
	}
	for k := range body {
		if !provisionArgs[k] {
			return badRequest("Unknown argument: \"%s\"", k)
		}
	}
	tv, ok := body["target"]
	if !ok || tv == nil {
		return badRequest("Missing argument: \"target\"")
	}
	verb, ok := tv.(string)
	if !ok {
		return badRequest("Invalid target: %s is not a string", pyRepr(tv))
	}
	if since, ok := verbSince[verb]; ok && ver(c) < since {
		return notAcceptable()
	}
	configDrive, err := configDriveArg(c, body, verb)
	if err != nil {
		return err
	}
	cleanSteps, err := stepsArg(body, "clean_steps")
	if err != nil {
		return err
	}
	if verb == "clean" && cleanSteps == nil {
		return badRequest("\"clean_steps\" is required when setting target provision state to clean")
	}
	if cleanSteps != nil && verb != "clean" {
		return badRequest("\"clean_steps\" is only valid when setting target provision state to clean or service")
	}
	deploySteps, err := stepsArg(body, "deploy_steps")
	if err != nil {
		return err
	}
	if deploySteps != nil {
		if ver(c) < v69DeploySteps {
			return notAcceptable()
		}
		if verb != "active" && verb != "deploy" && verb != "rebuild" {
			return badRequest("\"deploy_steps\" is only valid when setting target provision state to active or rebuild")
		}
	}
	disableRamdisk := false
	if v, ok := body["disable_ramdisk"]; ok && v != nil {
		if ver(c) < v70DisableRamdisk {
			return notAcceptable()
		}
		if disableRamdisk, err = boolValue(v); err != nil {
			return badRequest("Invalid disable_ramdisk: %s", err.Error())
		}
		if disableRamdisk && verb != "clean" {
			return badRequest("\"disable_ramdisk\" is only valid when setting target provision state to clean or service")
		}
	}

	n, err := s.loadNode(c, c.Param("node"))
	if err != nil {
		return err
	}
	t, ok := workflows.Accept(n.ProvisionState, verb)
	if !ok {
		// Ironic takes the node lock before it checks the state: a verb
		// that races a running operation is told the node is locked.
		if running, rerr := s.eng.Running(c.Request.Context(), n.UUID); rerr == nil && running && verb != "abort" {
			return nodeLocked(n.UUID, lockHolder(n))
		}
		return badRequest("%s", workflows.NotAllowed(verb, n.UUID, n.ProvisionState))
	}
	if n.Protected && slices.Contains([]string{"deleted", "undeploy", "rebuild"}, verb) {
		return errorf(http.StatusForbidden, "Node %s is protected and cannot be undeployed, rebuilt or deleted", n.UUID)
	}
	location := s.baseURL(c) + "/v1/nodes/" + n.UUID + "/states"
	ctx := c.Request.Context()

	if t.Operation == "abort" {
		err := s.eng.Signal(ctx, n.UUID, workflows.SignalAbort, nil)
		if errors.Is(err, ErrNoWorkflow) {
			return badRequest("%s", workflows.NotAllowed(verb, n.UUID, n.ProvisionState))
		}
		if err != nil {
			return fmt.Errorf("signal abort to node %s: %w", n.UUID, err)
		}
		s.addHistory(c, n.UUID, store.SeverityInfo, "provisioning", fmt.Sprintf("Abort requested in state \"%s\"", n.ProvisionState))
		writeEmpty(c, http.StatusAccepted, location)
		return nil
	}

	// A failed step's workflow waits for retry, skip-step or abort and holds
	// the node. A new verb from the failure state (undeploy, rebuild,
	// manage) is the operator's answer: abort the waiting workflow first.
	if workflows.IsFailureState(n.ProvisionState) {
		if err := s.abortWaiting(ctx, n.UUID); err != nil {
			return err
		}
	}
	req := workflows.ProvisionRequest{
		NodeUUID: n.UUID, Verb: verb, FromState: n.ProvisionState,
		ConfigDrive: configDrive, DeploySteps: deploySteps, CleanSteps: cleanSteps,
		DisableRamdisk: disableRamdisk, ConductorGroup: n.ConductorGroup,
		RequestedAt: time.Now().UTC(),
	}
	// As Ironic's node_locked_retry_attempts: a workflow that has just
	// recorded the node's stable state may still be finishing.
	for attempt := 1; ; attempt++ {
		err = s.eng.StartProvision(ctx, req)
		if !errors.Is(err, ErrNodeLocked) || attempt >= nodeLockedRetryAttempts {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(nodeLockedRetryInterval):
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
	var target *string
	if t.Target != "" {
		target = &t.Target
	}
	// Conditional on the state we saw: if the workflow already moved the
	// node on, its write wins and this one is a no-op. State and history
	// are one statement: this is every verb's store write.
	event := fmt.Sprintf("Provision action \"%s\" accepted in state \"%s\"; moving to \"%s\" with target \"%s\"", verb, n.ProvisionState, t.Next, t.Target)
	err = s.store.RecordTransition(ctx, n.UUID, store.Transition{
		From: []string{n.ProvisionState}, To: t.Next, Target: target,
		History: store.HistoryEvent{Severity: store.SeverityInfo, EventType: "provisioning", Event: event,
			Conductor: s.cfg.ConductorName, User: c.GetString(ctxUser)},
	})
	switch {
	case errors.Is(err, store.ErrStateConflict):
		s.log.Debug("workflow moved the node before the API recorded the transition", "node", n.UUID, "verb", verb)
		s.addHistory(c, n.UUID, store.SeverityInfo, "provisioning", event)
	case errors.Is(err, store.ErrNotFound):
		return nodeNotFound(n.UUID)
	case err != nil:
		return fmt.Errorf("record provision state of node %s: %w", n.UUID, err)
	}
	writeEmpty(c, http.StatusAccepted, location)
	return nil
}

// abortWaitTimeout bounds how long a verb waits for a failed workflow to
// end after abort.
const abortWaitTimeout = 15 * time.Second

// abortWaiting ends the workflow that waits for an operator on a failed
// node, if there is one, and waits until it is gone.
func (s *server) abortWaiting(ctx context.Context, nodeUUID string) error {
	running, err := s.eng.Running(ctx, nodeUUID)
	if err != nil || !running {
		return nil
	}
	if err := s.eng.Signal(ctx, nodeUUID, workflows.SignalAbort, nil); err != nil && !errors.Is(err, ErrNoWorkflow) {
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
