package apiserver

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// unholdWait bounds how long the unhold verb waits for the paused
// workflow to record the wait state (a variable for the tests' fake
// engine, which records nothing).
var unholdWait = 10 * time.Second

// unhold is the verb of API 1.85: the workflow paused in a hold state by
// a hold step (workflows/hold.go) is signalled and moves the node back to
// its wait state (clean hold → clean wait, service hold → service wait,
// deploy hold → wait call-back), then goes on with the plan's next step.
// Ironic's conductor changes the state before it answers; the verb waits
// (briefly) for the workflow to have done so, so that a client reading
// the node after the 202 sees the wait state or later.
func (s *server) unhold(c *gin.Context, n *store.Node, verb provision.Verb, location string) error {
	ctx := c.Request.Context()
	err := s.eng.Signal(ctx, n.UUID, workflows.SignalUnhold, nil)
	if errors.Is(err, ErrNoWorkflow) {
		// A hold state that no workflow holds: nothing to resume.
		return badRequest("%s", provision.NotAllowed(verb, n.UUID, n.ProvisionState))
	}
	if err != nil {
		return fmt.Errorf("signal unhold to node %s: %w", n.UUID, err)
	}
	s.addHistory(c, n.UUID, store.SeverityInfo, "provisioning", fmt.Sprintf("Unhold requested in state \"%s\"", n.ProvisionState))
	deadline := time.Now().Add(unholdWait)
	for time.Now().Before(deadline) {
		cur, err := s.store.GetNode(ctx, n.UUID)
		if err != nil || cur.ProvisionState != n.ProvisionState {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	writeEmpty(c, http.StatusAccepted, location)
	return nil
}
