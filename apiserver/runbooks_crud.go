package apiserver

import (
	"github.com/ironflow/ironflow/store"
)

// runbookKind: the runbook handlers are the deploy templates' (stepsKind,
// deploy_templates_crud.go) with the runbook's table, messages and store.
var runbookKind = &stepsKind[runbook]{
	what: "runbook", title: "Runbook", plural: "runbooks", path: "runbooks",
	since: v92Runbooks, res: runbookResource, defaults: runbookDefaultFields,
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
	get:    (*store.Store).GetRunbook,
	list:   (*store.Store).ListRunbooks,
	create: (*store.Store).CreateRunbook,
	update: (*store.Store).UpdateRunbook,
	delete: (*store.Store).DeleteRunbook,
}
