package apiserver

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ironflow/ironflow/pyliteral"
	"github.com/ironflow/ironflow/store"
)

// Deploy templates (API 1.55): the field table of docs/contributing.md,
// "Add an API resource", with Ironic's schemas (deploy_template.py:
// TEMPLATE_SCHEMA, api utils' TRAITS_SCHEMA and DEPLOY_STEP_SCHEMA).
// Runbooks (runbooks_fields.go) share the step validation.

// The microversions of Ironic's versions.py that introduce the resources.
// MaxVersionMinor (version.go) gates the request before they are read:
// runbooks answer once it reaches 92.
const (
	v55DeployTemplates = 55 // MINOR_55_DEPLOY_TEMPLATES
	v92Runbooks        = 92 // MINOR_92_RUNBOOKS
)

type (
	deployTemplate = store.DeployTemplate
	stepListQuery  = store.StepListFilter
	templateField  = field[deployTemplate, stepListQuery]
)

var templateFields = []templateField{
	{name: "created_at", since: v55DeployTemplates, value: timestamp(func(t *deployTemplate) time.Time { return t.CreatedAt }), sortable: true},
	{name: "updated_at", since: v55DeployTemplates, value: optTime(func(t *deployTemplate) *time.Time { return t.UpdatedAt }), sortable: true},
	{name: "uuid", since: v55DeployTemplates, value: uuidFor(func(t *deployTemplate) *string { return &t.UUID }), access: createOnly, sortable: true},
	{name: "name", since: v55DeployTemplates, value: traitName(func(t *deployTemplate) *string { return &t.Name }), access: writable, required: true, sortable: true},
	{name: "extra", since: v55DeployTemplates, value: dict(func(t *deployTemplate) *map[string]any { return &t.Extra }), access: writable},
	{name: "steps", since: v55DeployTemplates, value: deployStepList(func(t *deployTemplate) *[]store.DeployStep { return &t.Steps }), access: writable, required: true},
	{name: "links", since: v55DeployTemplates, value: links(func(t *deployTemplate) string { return "deploy_templates/" + t.UUID })},
}

// templateResource: the body parameter is "template" in Ironic's schema
// errors; Ironic refuses a PATCH of other fields with "Cannot patch ...".
var templateResource = allowedOnlyPatch(newResource("template", templateFields, nil))

// templateDefaultFields: a list without detail, Ironic's
// DEFAULT_RETURN_FIELDS.
var templateDefaultFields = []string{"uuid", "name"}

// stepInterfaces are the interfaces a template's or runbook's step may
// name: the keys of Ironic's DEPLOYING_INTERFACE_PRIORITY and
// CLEANING_INTERFACE_PRIORITY (conductor/steps.py), in their order, which
// the schema's enum message lists.
var stepInterfaces = []string{"vendor", "power", "management", "deploy", "firmware", "bios", "raid"}

// traitName is a name that must be a trait (Ironic's TRAITS_SCHEMA).
func traitName[T any](p func(*T) *string) fieldValue[T] {
	return text(p).setBy(func(r *T, v any) error {
		s, ok := v.(string)
		switch {
		case !ok:
			return typeErr(v, "string")
		case s == "":
			return fmt.Errorf("%s is too short", pyliteral.Repr(s))
		case len(s) > 255:
			return fmt.Errorf("%s is too long", pyliteral.Repr(s))
		case !standardTraits[s] && !customTraitRE.MatchString(s):
			return fmt.Errorf("%s is not valid under any of the given schemas", pyliteral.Repr(s))
		}
		*p(r) = s
		return nil
	})
}

// userStep is a step as a template or runbook gives it: rank is its
// priority (templates) or order (runbooks).
type userStep struct {
	Interface, Step string
	Args            map[string]any
	Rank            int
}

// parseStepList validates a list of steps as Ironic's step schemas do;
// rankKey is "priority" or "order".
func parseStepList(v any, rankKey string) ([]userStep, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, typeErr(v, "array")
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("[] is too short")
	}
	out := make([]userStep, 0, len(list))
	for _, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			return nil, typeErr(item, "object")
		}
		var extra []string
		for k := range m {
			if k != "interface" && k != "step" && k != "args" && k != rankKey {
				extra = append(extra, k)
			}
		}
		if len(extra) > 0 {
			return nil, additionalProps(extra)
		}
		for _, k := range []string{"interface", "step", "args", rankKey} {
			if _, ok := m[k]; !ok {
				return nil, fmt.Errorf("'%s' is a required property", k)
			}
		}
		var s userStep
		args, ok := m["args"].(map[string]any)
		if !ok {
			return nil, typeErr(m["args"], "object")
		}
		s.Args = args
		iface, ok := m["interface"].(string)
		if !ok {
			return nil, typeErr(m["interface"], "string")
		}
		if !contains(stepInterfaces, iface) {
			q := make([]string, len(stepInterfaces))
			for i, n := range stepInterfaces {
				q[i] = pyliteral.Repr(n)
			}
			return nil, fmt.Errorf("%s is not one of [%s]", pyliteral.Repr(iface), strings.Join(q, ", "))
		}
		s.Interface = iface
		rank, ok := stepRank(m[rankKey])
		if !ok {
			return nil, fmt.Errorf("%s is not valid under any of the given schemas", pyliteral.Repr(m[rankKey]))
		}
		s.Rank = rank
		name, ok := m["step"].(string)
		if !ok {
			return nil, typeErr(m["step"], "string")
		}
		if name == "" {
			return nil, fmt.Errorf("'' is too short")
		}
		s.Step = name
		out = append(out, s)
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// stepRank: an integer of at least 0, or a string of digits (Ironic's
// anyOf for priority and order).
func stepRank(v any) (int, bool) {
	switch t := v.(type) {
	case int64:
		return int(t), t >= 0 && t <= 1<<31-1
	case string:
		if t == "" || strings.Trim(t, "0123456789") != "" {
			return 0, false
		}
		n, err := strconv.Atoi(t)
		return n, err == nil && n <= 1<<31-1
	}
	return 0, false
}

// duplicateSteps names the interface/step pairs listed more than once, as
// Ironic's duplicate_steps words them; "" when there is none.
func duplicateSteps(steps []userStep) string {
	count := map[[2]string]int{}
	for _, s := range steps {
		count[[2]string{s.Interface, s.Step}]++
	}
	var dups []string
	for k, n := range count {
		if n > 1 {
			dups = append(dups, "interface: "+k[0]+", step: "+k[1])
		}
	}
	sort.Strings(dups)
	return strings.Join(dups, "; ")
}

// deployStepList is a template's steps.
func deployStepList[T any](p func(*T) *[]store.DeployStep) fieldValue[T] {
	asList := func(r *T, mask bool) any {
		out := make([]any, 0, len(*p(r)))
		for _, s := range *p(r) {
			args := mapOrEmpty(s.Args)
			if mask {
				args = maskSecrets(s.Args, scopeDriverInfo)
			} else {
				args = deepCopy(args)
			}
			out = append(out, map[string]any{"interface": s.Interface, "step": s.Step, "args": args, "priority": int64(s.Priority)})
		}
		return out
	}
	return fieldValue[T]{
		view: func(r *T, _ viewCtx) any { return asList(r, true) },
		get:  func(r *T) any { return asList(r, false) },
		set: func(r *T, v any) error {
			steps, err := parseStepList(v, "priority")
			if err != nil {
				return err
			}
			out := make([]store.DeployStep, len(steps))
			for i, s := range steps {
				out[i] = store.DeployStep{Interface: s.Interface, Step: s.Step, Args: s.Args, Priority: s.Rank}
			}
			*p(r) = out
			return nil
		},
	}
}
