package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/pyliteral"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// Deploy templates and runbooks turned into the steps a workflow runs, as
// Ironic's conductor does (conductor/steps.py: _get_deployment_templates,
// _get_steps_from_deployment_templates, _get_all_deployment_steps; the
// runbook check of the provision API). The workflows see only user steps:
// provision.Request.DeploySteps and CleanSteps.

// instanceTraits are the node's instance_info/traits: the traits the
// instance asked for (Nova's flavor or image, or the operator).
func instanceTraits(n *store.Node) []string {
	var out []string
	switch t := n.InstanceInfo["traits"].(type) {
	case []any:
		for _, v := range t {
			if s, ok := v.(string); ok {
				out = append(out, s)
			}
		}
	case []string:
		out = t
	}
	return out
}

// stepKey is a step's identity, interface and name.
type stepKey struct{ iface, step string }

// DeployStepsWithTemplates returns the user deploy steps of a deploy of n:
// user (the request's deploy_steps, JSON) followed by the steps of every
// deploy template whose name is among n's instance traits, a template
// step the user also gave dropped (the user's overrides it, as Ironic).
// Two matching templates with the same step are refused with Ironic's
// message (400). Without a matching template user is returned unchanged.
func DeployStepsWithTemplates(ctx context.Context, st *store.Store, n *store.Node, user json.RawMessage) (json.RawMessage, error) {
	if err := checkUserDeploySteps(n, user); err != nil {
		return nil, err
	}
	traits := instanceTraits(n)
	if len(traits) == 0 {
		return user, nil
	}
	templates, err := st.DeployTemplatesByNames(ctx, traits)
	if err != nil {
		return nil, fmt.Errorf("deploy templates of node %s: %w", n.UUID, err)
	}
	if len(templates) == 0 {
		return user, nil
	}
	var steps []map[string]any
	seen := map[stepKey]bool{}
	if len(user) > 0 && string(user) != "null" {
		if err := json.Unmarshal(user, &steps); err != nil {
			return nil, badRequest("Invalid deploy_steps: %s", err.Error())
		}
		for _, s := range steps {
			iface, _ := s["interface"].(string)
			name, _ := s["step"].(string)
			seen[stepKey{iface, name}] = true
		}
	}
	names := make([]string, len(templates))
	count := map[string]int{}
	var fromTemplates []store.DeployStep
	for i, t := range templates {
		names[i] = t.Name
		for _, s := range t.Steps {
			count[s.Interface+"."+s.Step]++
			fromTemplates = append(fromTemplates, s)
		}
	}
	var dups []string
	for id, c := range count {
		if c > 1 {
			dups = append(dups, id)
		}
	}
	if len(dups) > 0 {
		sort.Strings(dups)
		return nil, badRequest("Failed to validate deploy or power info for node %s: "+
			"Validation of deploy steps from deploy templates matching this node's instance traits failed. "+
			"Matching deploy templates: %s. Errors: deploy steps from all deploy templates matching this node's instance traits "+
			"cannot have the same interface and step. Duplicate deploy steps for %s", n.UUID, strings.Join(names, ","), strings.Join(dups, ", "))
	}
	if err := checkTemplateDeploySteps(n, names, fromTemplates); err != nil {
		return nil, err
	}
	for _, s := range fromTemplates {
		if seen[stepKey{s.Interface, s.Step}] {
			continue
		}
		args := s.Args
		if args == nil {
			args = map[string]any{}
		}
		steps = append(steps, map[string]any{"interface": s.Interface, "step": s.Step, "args": args, "priority": s.Priority})
	}
	raw, err := json.Marshal(steps)
	if err != nil {
		return nil, fmt.Errorf("deploy steps of node %s: %w", n.UUID, err)
	}
	return raw, nil
}

// checkUserDeploySteps checks a deploy request's own deploy_steps as
// Ironic's conductor does before the deploy starts
// (validate_user_deploy_steps_and_templates with skip_missing): a step the
// node cannot run, bad arguments, a step given twice, are 400 with
// Ironic's message; a step not known before the agent runs is left for
// the deploy to check once the agent has reported its steps.
func checkUserDeploySteps(n *store.Node, raw json.RawMessage) error {
	user, err := workflows.ParseUserSteps(raw)
	if err != nil {
		return badRequest("Invalid deploy_steps: %s", err.Error())
	}
	return deployStepsError(n, workflows.CheckDeploySteps(user, cachedAgentSteps(n, provision.StepKindDeploy), stepInterfacesOf(n)),
		`Validation of deploy steps from "deploy steps" argument failed.`)
}

// checkTemplateDeploySteps checks the steps of the deploy templates
// matching n's instance traits (names) as checkUserDeploySteps does.
func checkTemplateDeploySteps(n *store.Node, names []string, steps []store.DeployStep) error {
	user := make([]workflows.UserStep, len(steps))
	for i, s := range steps {
		u := workflows.UserStep{HasPriority: true, ArgsGiven: s.Args}
		u.Interface, u.StepID.Step, u.Priority = s.Interface, s.Step, s.Priority
		if u.ArgsGiven == nil {
			u.ArgsGiven = map[string]any{}
		}
		if b, err := json.Marshal(u.ArgsGiven); err == nil {
			u.Args = b
		}
		user[i] = u
	}
	return deployStepsError(n, workflows.CheckDeploySteps(user, cachedAgentSteps(n, provision.StepKindDeploy), stepInterfacesOf(n)),
		"Validation of deploy steps from deploy templates matching this node's instance traits failed. "+
			"Matching deploy templates: "+strings.Join(names, ",")+". Errors: ")
}

// deployStepsError is err, a refused deploy plan, as Ironic's API answers
// it: InstanceDeployFailure with the InvalidParameterValue's 400.
func deployStepsError(n *store.Node, err error, prefix string) error {
	var perr *workflows.PlanError
	if errors.As(err, &perr) {
		return badRequest("Failed to validate deploy or power info for node %s: %s%s", n.UUID, prefix, perr.Error())
	}
	if err != nil {
		return fmt.Errorf("check the deploy steps of node %s: %w", n.UUID, err)
	}
	return nil
}

// RunbookPlan is what a runbook gives a clean or service request.
type RunbookPlan struct {
	UUID, Name string
	// Steps are the runbook's steps by their order, in the form of
	// clean_steps and service_steps (interface, step, args).
	Steps json.RawMessage
	// DisableRamdisk is the runbook's disable_ramdisk.
	DisableRamdisk bool
}

// RunbookSteps resolves the runbook ident (a UUID or name) for a clean or
// service of n at API version minor: 404 if there is none; below 1.112,
// 400 unless its name is among n's traits (a runbook is approved for a
// node by giving the node a trait of the runbook's name, Ironic's runbooks
// documentation); from 1.112, 400 unless n has one of its traits.
func RunbookSteps(ctx context.Context, st *store.Store, n *store.Node, ident string, minor int) (*RunbookPlan, error) {
	rb, err := st.GetRunbook(ctx, ident)
	if errors.Is(err, store.ErrNotFound) {
		return nil, runbookKind.notFound(ident)
	}
	if err != nil {
		return nil, fmt.Errorf("get runbook %s: %w", ident, err)
	}
	if minor >= v112RunbookTraits {
		// From 1.112 the node needs one of the runbook's traits (Ironic's
		// _handle_runbook, with its messages).
		if len(rb.Traits) == 0 {
			return nil, badRequest("Runbook %s has no traits configured. Please ask an administrator to add traits to the runbook.", rb.UUID)
		}
		if !slices.ContainsFunc(rb.Traits, func(t string) bool { return slices.Contains(n.Traits, t) }) {
			sorted := slices.Sorted(slices.Values(rb.Traits))
			return nil, badRequest("This runbook has not been approved for use on this node %s. The node does not have any of the runbook's traits %s. "+
				"Please ask an administrator to add a matching trait to your node.", n.UUID, pyliteral.Repr(stringsToAny(sorted)))
		}
	} else if !slices.Contains(n.Traits, rb.Name) {
		return nil, errorf(http.StatusBadRequest, "Runbook %s is not compatible with node %s: the node has no trait %s.", rb.UUID, n.UUID, rb.Name)
	}
	ordered := append([]store.RunbookStep(nil), rb.Steps...)
	sort.SliceStable(ordered, func(i, j int) bool { return ordered[i].Order < ordered[j].Order })
	steps := make([]map[string]any, len(ordered))
	for i, s := range ordered {
		args := s.Args
		if args == nil {
			args = map[string]any{}
		}
		steps[i] = map[string]any{"interface": s.Interface, "step": s.Step, "args": args}
	}
	raw, err := json.Marshal(steps)
	if err != nil {
		return nil, fmt.Errorf("steps of runbook %s: %w", rb.UUID, err)
	}
	return &RunbookPlan{UUID: rb.UUID, Name: rb.Name, Steps: raw, DisableRamdisk: rb.DisableRamdisk}, nil
}

// runbookArg reads the provision body's runbook (API 1.92): a string, for
// clean or service only, instead of their steps.
func runbookArg(c *gin.Context, body map[string]any, verb provision.Verb, steps json.RawMessage) (string, error) {
	v, ok := body["runbook"]
	if !ok || v == nil {
		return "", nil
	}
	if ver(c) < v92Runbooks {
		return "", notAcceptable()
	}
	ident, ok := v.(string)
	if !ok || ident == "" {
		return "", badRequest("Invalid runbook: %s is not a string", pyliteral.Repr(v))
	}
	if verb != "clean" && verb != "service" {
		return "", badRequest("\"runbook\" is only valid when setting target provision state to clean or service")
	}
	if steps != nil {
		return "", badRequest("\"runbook\" and \"clean_steps\" or \"service_steps\" are mutually exclusive")
	}
	return ident, nil
}

// resolveSteps gives a provision request its steps from deploy templates
// (a deploy) or from its runbook (clean, service).
func (s *server) resolveSteps(ctx context.Context, n *store.Node, req provisionBody) (provisionBody, error) {
	var err error
	if deploysImage(req.verb) {
		req.deploySteps, err = DeployStepsWithTemplates(ctx, s.store, n, req.deploySteps)
		return req, err
	}
	if req.runbook != "" {
		rb, err := RunbookSteps(ctx, s.store, n, req.runbook, req.minor)
		if err != nil {
			return req, err
		}
		if req.verb == provision.VerbService {
			req.serviceSteps = rb.Steps
		} else {
			req.cleanSteps = rb.Steps
		}
		req.disableRamdisk = req.disableRamdisk || rb.DisableRamdisk
	}
	return req, nil
}

// stepInterfacesOf is the node's interfaces that declare steps
// (workflows.NodeInfo.StepInterfaces of the stored node).
func stepInterfacesOf(n *store.Node) map[string]hardware.Interface {
	return map[string]hardware.Interface{"bios": hardware.Interface(n.BIOSInterface), "raid": hardware.Interface(n.RAIDInterface),
		"firmware": hardware.Interface(n.FirmwareInterface)}
}

func stringsToAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
