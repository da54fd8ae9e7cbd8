package apiserver

import (
	"context"
	"errors"
	"net/http"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/ironflow/ironflow/store"
)

// temporaryFailure is Ironic's TemporaryFailure (ironic/common/exception.py):
// a 503 that tells the client to retry. It answers every request that
// failed because PostgreSQL or the Temporal server could not be reached in
// time, so that a client meets an outage as a retryable answer, never as a
// 500 or a request that hangs (docs/production.md, "Outages").
func temporaryFailure() *apiError {
	return &apiError{status: http.StatusServiceUnavailable, msg: "Resource temporarily unavailable, please retry."}
}

// dependencyDown reports whether err comes from a part of the control
// plane that is down or does not answer: the database (store.IsUnavailable)
// or the Temporal server (its gRPC Unavailable or DeadlineExceeded, or a
// call cut by the SDK's own deadline).
func dependencyDown(err error) bool {
	if store.IsUnavailable(err) {
		return true
	}
	var unavailable *serviceerror.Unavailable
	var deadline *serviceerror.DeadlineExceeded
	return errors.As(err, &unavailable) || errors.As(err, &deadline) || errors.Is(err, context.DeadlineExceeded)
}

// engineCheckTimeout bounds the check that the workflow engine answers,
// made before a verb writes the node (requireEngine).
const engineCheckTimeout = 5 * time.Second

// healthChecker is an Engine that can say whether it answers now
// (TemporalEngine: the Temporal frontend's gRPC health check, which reads
// no persistence).
type healthChecker interface {
	CheckHealth(ctx context.Context) error
}

// requireEngine answers 503 when the workflow engine does not answer, so
// that a verb leaves the node as it was rather than write a state no
// workflow will carry on: the verb's own start still reverts its write if
// the engine goes down between the check and the start.
func (s *server) requireEngine(ctx context.Context) error {
	hc, ok := s.eng.(healthChecker)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, engineCheckTimeout)
	defer cancel()
	if err := hc.CheckHealth(ctx); err != nil {
		s.log.WarnContext(ctx, "the workflow engine does not answer: verb refused with 503", "err", err)
		return temporaryFailure()
	}
	return nil
}

// CheckHealth implements healthChecker.
func (e *TemporalEngine) CheckHealth(ctx context.Context) error {
	_, err := e.Client.CheckHealth(ctx, &client.CheckHealthRequest{})
	return err
}
