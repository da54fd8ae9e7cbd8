package apiserver

import (
	"github.com/ironflow/ironflow/pyliteral"
	"github.com/ironflow/ironflow/store"
)

// runbookKind: the runbook handlers are the deploy templates' (stepsKind,
// deploy_templates_crud.go) with the runbook's table, messages and store.
var runbookKind = &stepsKind[runbook]{
	what: "runbook", title: "Runbook", path: "runbooks",
	res: runbookResource, defaults: runbookDefaultFields,
	blank: func() *runbook { return &runbook{Extra: map[string]any{}} },
	uuid:  func(r *runbook) string { return r.UUID },
	name:  func(r *runbook) string { return r.Name },
	invalid: func(r *runbook) error {
		steps := make([]userStep, len(r.Steps))
		for i, s := range r.Steps {
			steps[i] = userStep{Interface: s.Interface, Step: s.Step}
		}
		if d := duplicateSteps(steps); d != "" {
			return badRequest("Runbook invalid: Duplicate runbook steps. A runbook cannot have multiple deploy steps "+
				"with the same interface and step. Duplicates: %s.", d)
		}
		return nil
	},
	beforePatch: runbookOwnerPatch,
	checkCreate: checkRunbookCreate,
	get:         (*store.Store).GetRunbook,
	list:        (*store.Store).ListRunbooks,
	create:      (*store.Store).CreateRunbook,
	update:      (*store.Store).UpdateRunbook,
	delete:      (*store.Store).DeleteRunbook,
}

// runbookOwnerPatch is runbook.py's patch rule for owner and public: a
// public runbook has no owner, so setting an owner is refused unless the
// same patch makes the runbook non-public, and any change of public
// clears the owner before the patch applies (an owner the patch gives
// then stands).
func runbookOwnerPatch(r *runbook, ops []patchOp) error {
	var owner, public []any
	for _, op := range ops {
		if op.Op == "remove" {
			continue
		}
		switch op.Path {
		case "/owner":
			owner = append(owner, op.Value)
		case "/public":
			public = append(public, op.Value)
		}
	}
	if len(owner) > 0 {
		publicValue := len(public) > 0 && pyliteral.Truthy(public[0])
		if r.Public && len(public) == 0 || publicValue {
			patch := make([]any, len(ops))
			for i, op := range ops {
				patch[i] = op.asMap()
			}
			return badRequest("Couldn't apply patch '%s'. Reason: There cannot be an owner for a public runbook", pyliteral.Repr(patch))
		}
	}
	if len(public) > 0 {
		r.Owner = nil
	}
	return nil
}
