package activities

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/ironflow/ironflow/store"
)

// Backoff of awaitStore.
const (
	storeWaitInitial = 500 * time.Millisecond
	storeWaitMax     = 5 * time.Second
)

// awaitStore runs f, a store call of a hardware or agent activity, again
// while the database is unavailable (store.IsUnavailable), for as long as
// the activity's own deadline allows one more call. Those activities have a
// few attempts meant for the BMC or the agent: without the wait a database
// outage of a minute would spend them all and fail the deploy, where the
// workflow's own store work waits it out (workflows/recorder.go,
// localOptions). A regular activity heartbeats while it waits, repeating
// the details its attempt started with, so that its heartbeat timeout does
// not end it and a later attempt still finds them.
func awaitStore(ctx context.Context, f func() error) error {
	backoff := storeWaitInitial
	for {
		err := f()
		if err == nil || !store.IsUnavailable(err) {
			return err
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < backoff+store.DefaultQueryTimeout {
			return err
		}
		beat(ctx)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, storeWaitMax)
	}
}

// beat heartbeats a regular activity with the details its attempt started
// with; a local activity has no heartbeat.
func beat(ctx context.Context) {
	if !activity.IsActivity(ctx) || activity.GetInfo(ctx).IsLocalActivity {
		return
	}
	var details any
	if activity.HasHeartbeatDetails(ctx) && activity.GetHeartbeatDetails(ctx, &details) == nil && details != nil {
		activity.RecordHeartbeat(ctx, details)
		return
	}
	activity.RecordHeartbeat(ctx)
}
