package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/provision"
)

// ProvideNode makes a manageable node available, through automated cleaning
// when the node boots the agent and cleaning is enabled.
func ProvideNode(ctx workflow.Context, req provision.Request) error {
	r, err := newRun(ctx, req, provision.OpProvide)
	if err != nil {
		return err
	}
	r.rec.active, r.rec.fail, r.rec.target = provision.Cleaning, provision.CleanFailed, req.Transition.Target
	if err := r.rec.enter(provision.Cleaning, provision.Available, r.cleaningEvent()); err != nil {
		return ended(err)
	}
	if err := r.clean(provision.Available); err != nil {
		return r.finish(err)
	}
	return r.finish(r.rec.record(RecordStateInput{To: provision.Available, Event: "Node available", ClearAgent: true}))
}
