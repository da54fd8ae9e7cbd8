package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/pyliteral"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// Rollouts (docs/rollouts.md) are ironflow's own resource, under a prefix
// that is not Ironic's (/v1 is Ironic's): one node operation carried out
// over a set of nodes in waves by the Rollout workflow.
const rolloutsRoot = "/ironflow/v1/rollouts"

// Bounds of a rollout's numbers.
const (
	defaultContinueAsNewAfter = 500
	maxRolloutSoakSeconds     = 7 * 24 * 3600
	maxRolloutNodes           = 100000
)

// rolloutTargets are the provision verbs a rollout may carry out: those
// without a secret in their body (rescue takes a password) and not abort,
// which is the rollout's own signal.
var rolloutTargets = map[provision.Verb]bool{
	provision.VerbActive: true, provision.VerbDeploy: true, provision.VerbRebuild: true,
	provision.VerbUndeploy: true, provision.VerbDeleted: true, provision.VerbClean: true,
	provision.VerbService: true, provision.VerbManage: true, provision.VerbProvide: true,
	provision.VerbInspect: true,
}

func (s *server) rollouts() (rolloutEngine, error) {
	re, ok := s.eng.(rolloutEngine)
	if !ok {
		return nil, errorf(http.StatusNotImplemented, "Rollouts need the Temporal engine.")
	}
	return re, nil
}

// createRollout answers POST /ironflow/v1/rollouts: it checks everything
// (the operation as PUT .../states/provision would, the selector, the
// numbers), resolves the selector, lists the nodes whose state does not
// allow the operation (400, or left out with on_refused "skip") and
// starts the workflow. Nothing starts on a refusal.
func (s *server) createRollout(c *gin.Context) error {
	re, err := s.rollouts()
	if err != nil {
		return err
	}
	body, err := decodeObject(c)
	if err != nil {
		return err
	}
	spec, onRefused, err := parseRolloutSpec(body)
	if err != nil {
		return err
	}
	verb := provision.ParseVerb(fmt.Sprint(spec.Operation["target"]))
	power, isPower := workflows.RolloutPowerAction(spec.Operation)
	if err := s.checkRolloutOperation(spec.Operation); err != nil {
		return err
	}
	nodes, err := resolveSelector(c.Request.Context(), s.store, spec.Requested)
	if err != nil {
		return err
	}
	if len(nodes) == 0 {
		return badRequest("The rollout's selector matches no node.")
	}
	if len(nodes) > maxRolloutNodes {
		return badRequest("The rollout's selector matches %d nodes, more than %d.", len(nodes), maxRolloutNodes)
	}
	// A project's rollout (policy_rollouts.go): its nodes are the ones
	// the project owns or leases; one it named that is not is a node it
	// cannot see.
	project := c.GetString(ctxRolloutProject)
	var allowed []string
	for _, u := range nodes {
		n, err := s.store.GetNode(c.Request.Context(), u)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if project != "" && !ownsOrLeases(n, project) {
			if len(spec.Requested.Nodes) > 0 {
				return errorf(http.StatusNotFound, "Node %s could not be found.", u)
			}
			continue
		}
		if isPower {
			// A power action is taken in any provision state but while
			// another operation holds the node (on_busy says what then).
			if power["target"] == "power off" || power["target"] == "soft power off" {
				if n.DisablePowerOff {
					spec.Refused = append(spec.Refused, workflows.RolloutNode{UUID: u, State: workflows.RolloutNodeSkipped,
						ProvisionState: string(n.ProvisionState), LastError: fmt.Sprintf("Node %s must stay powered on (disable_power_off).", u)})
					continue
				}
			}
			allowed = append(allowed, u)
			continue
		}
		if _, ok := provision.Accept(n.ProvisionState, verb); !ok {
			spec.Refused = append(spec.Refused, workflows.RolloutNode{UUID: u, State: workflows.RolloutNodeSkipped,
				ProvisionState: string(n.ProvisionState), LastError: provision.NotAllowed(verb, u, n.ProvisionState)})
			continue
		}
		allowed = append(allowed, u)
	}
	if len(spec.Refused) > 0 && onRefused != "skip" {
		name := string(verb)
		if isPower {
			name = fmt.Sprint(power["target"])
		}
		msg := fmt.Sprintf("The operation \"%s\" is not allowed on %d of the rollout's nodes (on_refused is \"refuse\"):", name, len(spec.Refused))
		for _, r := range spec.Refused {
			msg += fmt.Sprintf(" %s (%s);", r.UUID, r.ProvisionState)
		}
		return badRequest("%s", msg[:len(msg)-1])
	}
	if len(allowed) == 0 && len(spec.Refused) == 0 {
		return badRequest("The rollout's selector matches no node.")
	}
	if len(allowed) == 0 {
		return badRequest("The operation \"%s\" is allowed on none of the rollout's nodes.", verb)
	}
	spec.UUID = uuid.NewString()
	spec.Selector = workflows.RolloutSelector{Nodes: allowed}
	spec.CreatedBy = c.GetString(ctxUser)
	spec.Project = project
	if cd, ok := spec.Operation["configdrive"]; ok {
		// The template stays in PostgreSQL, out of the workflow's history.
		if err := s.store.PutRolloutConfigDrive(c.Request.Context(), spec.UUID, cd); err != nil {
			return err
		}
		spec.Operation = maps.Clone(spec.Operation)
		delete(spec.Operation, "configdrive")
		spec.ConfigDriveTemplate = true
	}
	if err := re.StartRollout(c.Request.Context(), workflows.RolloutInput{Spec: spec}); err != nil {
		if spec.ConfigDriveTemplate {
			_ = s.store.DeleteRolloutConfigDrive(context.WithoutCancel(c.Request.Context()), spec.UUID)
		}
		return err
	}
	c.Header("Location", s.baseURL(c)+rolloutsRoot+"/"+spec.UUID)
	writeJSON(c, http.StatusCreated, map[string]any{
		"uuid": spec.UUID, "state": "starting", "spec": spec,
		"links": []link{{Href: s.baseURL(c) + rolloutsRoot + "/" + spec.UUID, Rel: "self"}},
	})
	return nil
}

// ownsOrLeases reports whether project owns or leases n.
func ownsOrLeases(n *store.Node, project string) bool {
	return (n.Owner != nil && *n.Owner == project) || (n.Lessee != nil && *n.Lessee == project)
}

// checkRolloutOperation checks the operation as PUT
// /v1/nodes/{node}/states/provision checks its body (parseProvision, at
// the newest version), with its messages.
func (s *server) checkRolloutOperation(op map[string]any) error {
	if cd, ok := op["configdrive"]; ok {
		// A template, rendered for each node (docs/rollouts.md, "Config
		// drives"); the provision endpoint's own checks follow.
		if v := provision.ParseVerb(fmt.Sprint(op["target"])); v != provision.VerbActive && v != provision.VerbDeploy && v != provision.VerbRebuild {
			return badRequest("A configdrive goes with a deploy or a rebuild (target active, deploy or rebuild), not %s.", pyliteral.Repr(op["target"]))
		}
		if err := checkConfigDriveTemplate(cd); err != nil {
			return badRequest("Invalid configdrive: %s", err.Error())
		}
	}
	power, isPower := workflows.RolloutPowerAction(op)
	body := any(op)
	if isPower {
		body = power
	}
	b, err := json.Marshal(body)
	if err != nil {
		return badRequest("Invalid operation: %s", err.Error())
	}
	tc, _ := gin.CreateTestContext(httptest.NewRecorder())
	tc.Request = httptest.NewRequest(http.MethodPut, "/", bytes.NewReader(b))
	tc.Request.Header.Set("Content-Type", "application/json")
	tc.Set(ctxVersion, servedMaxMinor)
	if isPower {
		// PUT .../states/power's checks, with its messages.
		req, err := parsePower(tc)
		if err != nil {
			return err
		}
		if !req.known {
			return badRequest("A rollout cannot carry out the power target \"%s\" (power on, power off, rebooting, soft power off, soft rebooting).", req.target)
		}
		return nil
	}
	_, err = parseProvision(tc)
	return err
}

// parseRolloutSpec reads the body of POST /ironflow/v1/rollouts.
func parseRolloutSpec(body map[string]any) (workflows.RolloutSpec, string, error) {
	body, _ = normalizeNumbers(body).(map[string]any)
	spec := workflows.RolloutSpec{MaxFailures: -1, OnBusy: workflows.RolloutOnBusySkip, ContinueAsNewAfter: defaultContinueAsNewAfter}
	known := map[string]bool{"operation": true, "selector": true, "canary": true, "wave_size": true, "parallelism": true,
		"max_failures": true, "max_failure_percent": true, "soak_seconds": true, "approval": true, "on_busy": true,
		"on_refused": true, "continue_as_new_after": true, "poll_seconds": true, "rolling": true,
		"wave_max_failures": true, "wave_max_failure_percent": true}
	for k := range body {
		if !known[k] {
			return spec, "", badRequest("Unknown argument: \"%s\"", k)
		}
	}
	op, ok := body["operation"].(map[string]any)
	if !ok {
		return spec, "", badRequest("Invalid operation: %s is not of type 'object'", pyliteral.Repr(body["operation"]))
	}
	if pw, isPower := op["power"]; isPower {
		// A power action: the body of PUT /v1/nodes/{node}/states/power.
		if len(op) != 1 {
			return spec, "", badRequest("Invalid operation: a power action is {\"power\": {\"target\": ..., \"timeout\": ...}} alone, not with a provision target.")
		}
		if _, ok := pw.(map[string]any); !ok {
			return spec, "", badRequest("Invalid operation.power: %s is not of type 'object'", pyliteral.Repr(pw))
		}
	} else {
		target, ok := op["target"].(string)
		if !ok {
			return spec, "", badRequest("Missing argument: \"operation.target\"")
		}
		if !rolloutTargets[provision.ParseVerb(target)] {
			return spec, "", badRequest("A rollout cannot carry out the provision target \"%s\".", target)
		}
	}
	spec.Operation = op

	sel, ok := body["selector"].(map[string]any)
	if !ok {
		return spec, "", badRequest("Invalid selector: %s is not of type 'object'", pyliteral.Repr(body["selector"]))
	}
	raw, _ := json.Marshal(sel)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec.Requested); err != nil {
		return spec, "", badRequest("Invalid selector: %s", err.Error())
	}
	r := spec.Requested
	if len(r.Nodes) == 0 && r.ResourceClass == "" && r.ConductorGroup == nil && r.Owner == "" && r.Shard == "" &&
		r.ProvisionState == "" && len(r.Traits) == 0 {
		return spec, "", badRequest("Invalid selector: name nodes, or at least one of resource_class, conductor_group, owner, shard, provision_state, traits.")
	}

	intArg := func(key string, lo, hi int, dst *int) error {
		v, ok := body[key]
		if !ok || v == nil {
			return nil
		}
		f, ok := number(v)
		if !ok || f != math.Trunc(f) || f < float64(lo) || f > float64(hi) {
			return badRequest("Invalid %s: %s is not an integer between %d and %d", key, pyliteral.Repr(v), lo, hi)
		}
		*dst = int(f)
		return nil
	}
	spec.WaveSize = 0
	for _, a := range []struct {
		key    string
		lo, hi int
		dst    *int
	}{
		{"canary", 0, maxRolloutNodes, &spec.Canary},
		{"wave_size", 1, maxRolloutNodes, &spec.WaveSize},
		{"parallelism", 0, maxRolloutNodes, &spec.Parallelism},
		{"max_failures", 0, maxRolloutNodes, &spec.MaxFailures},
		{"max_failure_percent", 1, 100, &spec.MaxFailurePercent},
		{"wave_max_failures", 1, maxRolloutNodes, &spec.WaveMaxFailures},
		{"wave_max_failure_percent", 1, 100, &spec.WaveMaxFailurePercent},
		{"soak_seconds", 0, maxRolloutSoakSeconds, &spec.SoakSeconds},
		{"continue_as_new_after", 1, maxRolloutNodes, &spec.ContinueAsNewAfter},
	} {
		if err := intArg(a.key, a.lo, a.hi, a.dst); err != nil {
			return spec, "", err
		}
	}
	if spec.WaveSize == 0 {
		return spec, "", badRequest("Missing argument: \"wave_size\"")
	}
	if v, ok := body["poll_seconds"]; ok && v != nil {
		f, ok := number(v)
		if !ok || f < 0.05 || f > 5 {
			return spec, "", badRequest("Invalid poll_seconds: %s is not a number between 0.05 and 5", pyliteral.Repr(v))
		}
		spec.PollSeconds = f
	}
	if v, ok := body["approval"]; ok && v != nil {
		b, ok := v.(bool)
		if !ok {
			return spec, "", badRequest("Invalid approval: %s is not a boolean", pyliteral.Repr(v))
		}
		spec.Approval = b
	}
	if v, ok := body["rolling"]; ok && v != nil {
		b, ok := v.(bool)
		if !ok {
			return spec, "", badRequest("Invalid rolling: %s is not a boolean", pyliteral.Repr(v))
		}
		spec.Rolling = b
	}
	if spec.Rolling && (spec.SoakSeconds > 0 || spec.Approval) {
		return spec, "", badRequest("Invalid rolling: rolling waves have no soak time or approval between them (soak_seconds %d, approval %t).", spec.SoakSeconds, spec.Approval)
	}
	if v, ok := body["on_busy"]; ok && v != nil {
		if v != workflows.RolloutOnBusySkip && v != workflows.RolloutOnBusyWait {
			return spec, "", badRequest("Invalid on_busy: %s is not one of 'skip', 'wait'", pyliteral.Repr(v))
		}
		spec.OnBusy = v.(string)
	}
	onRefused := "refuse"
	if v, ok := body["on_refused"]; ok && v != nil {
		if v != "refuse" && v != "skip" {
			return spec, "", badRequest("Invalid on_refused: %s is not one of 'refuse', 'skip'", pyliteral.Repr(v))
		}
		onRefused = v.(string)
	}
	return spec, onRefused, nil
}

// rolloutOf is the rollout engine and the rollout the path names.
func (s *server) rolloutOf(c *gin.Context) (rolloutEngine, string, error) {
	re, err := s.rollouts()
	if err != nil {
		return nil, "", err
	}
	id, err := rolloutUUIDParam(c)
	return re, id, err
}

// rolloutUUIDParam is the rollout the path names, or 404.
func rolloutUUIDParam(c *gin.Context) (string, error) {
	id := c.Param("uuid")
	if _, err := uuid.Parse(id); err != nil {
		return "", errorf(http.StatusNotFound, "Rollout %s could not be found.", id)
	}
	return id, nil
}

// rolloutDocument is GET's answer: the workflow's view, whether it still
// runs, per-wave counts and an estimate of the time left.
type rolloutDocument struct {
	UUID string `json:"uuid"`
	workflows.RolloutView
	Running              bool          `json:"running"`
	WaveSummaries        []waveSummary `json:"wave_summaries"`
	EstimatedSecondsLeft *float64      `json:"estimated_seconds_left"`
	Links                []link        `json:"links"`
}

type waveSummary struct {
	Wave  int            `json:"wave"`
	Nodes int            `json:"nodes"`
	By    map[string]int `json:"by_state"`
}

func (s *server) showRollout(c *gin.Context) error {
	re, id, err := s.rolloutOf(c)
	if err != nil {
		return err
	}
	v, running, err := re.ShowRollout(c.Request.Context(), id)
	if errors.Is(err, errNoRollout) {
		return errorf(http.StatusNotFound, "Rollout %s could not be found.", id)
	}
	if err != nil {
		return err
	}
	doc := rolloutDocument{UUID: id, RolloutView: *v, Running: running,
		Links: []link{{Href: s.baseURL(c) + rolloutsRoot + "/" + id, Rel: "self"}}}
	for w, idx := range v.Waves {
		ws := waveSummary{Wave: w, Nodes: len(idx), By: map[string]int{}}
		for _, i := range idx {
			ws.By[v.Nodes[i].State]++
		}
		doc.WaveSummaries = append(doc.WaveSummaries, ws)
	}
	doc.EstimatedSecondsLeft = estimateLeft(v, running)
	writeJSON(c, http.StatusOK, doc)
	return nil
}

// estimateLeft is the mean time of the node operations ended so far times
// the nodes left, divided by the parallelism: nil before one has ended,
// 0 once the rollout is over. Soak and approval are not counted.
func estimateLeft(v *workflows.RolloutView, running bool) *float64 {
	if !running {
		zero := 0.0
		return &zero
	}
	var total time.Duration
	ended, left := 0, 0
	for _, n := range v.Nodes {
		switch n.State {
		case workflows.RolloutNodeSucceeded, workflows.RolloutNodeFailed:
			if !n.StartedAt.IsZero() && !n.EndedAt.IsZero() {
				total += n.EndedAt.Sub(n.StartedAt)
				ended++
			}
		case workflows.RolloutNodePending, workflows.RolloutNodeRunning:
			left++
		}
	}
	if ended == 0 {
		return nil
	}
	par := v.Spec.Parallelism
	if par <= 0 {
		par = max(v.Spec.WaveSize, 1)
	}
	est := (total.Seconds() / float64(ended)) * math.Ceil(float64(left)/float64(par))
	return &est
}

func (s *server) listRollouts(c *gin.Context) error {
	re, err := s.rollouts()
	if err != nil {
		return err
	}
	list, err := re.ListRollouts(c.Request.Context(), c.GetString(ctxRolloutProject))
	if err != nil {
		return err
	}
	type item struct {
		rolloutSummary
		Links []link `json:"links"`
	}
	out := []item{}
	for _, r := range list {
		out = append(out, item{r, []link{{Href: s.baseURL(c) + rolloutsRoot + "/" + r.UUID, Rel: "self"}}})
	}
	writeJSON(c, http.StatusOK, map[string]any{"rollouts": out})
	return nil
}

// signalRollout answers POST /ironflow/v1/rollouts/{uuid}/{pause,resume,
// approve,abort}: 202 once the workflow has the signal.
func (s *server) signalRollout(signal string) handler {
	return func(c *gin.Context) error {
		re, id, err := s.rolloutOf(c)
		if err != nil {
			return err
		}
		err = re.SignalRollout(c.Request.Context(), id, signal)
		if errors.Is(err, errNoRollout) {
			return errorf(http.StatusNotFound, "Rollout %s could not be found or has ended.", id)
		}
		if err != nil {
			return err
		}
		writeEmpty(c, http.StatusAccepted, s.baseURL(c)+rolloutsRoot+"/"+id)
		return nil
	}
}

// number is a JSON number of a decoded body (normalizeNumbers).
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}
