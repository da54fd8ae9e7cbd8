package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/ironflow/ironflow/tracing"
)

// addOTelEndpoint is the --otel-endpoint flag of a command (docs/tracing.md).
func addOTelEndpoint(s *settings) *string {
	return s.String("otel-endpoint", "", "the OTLP/gRPC collector this process sends its traces to: host:port (plain gRPC), http://host:port or https://host:port (empty: no traces; docs/tracing.md)")
}

// processTracing is the process's tracing (nil: off); dialTemporal gives
// its Temporal interceptor to every client, and so to the workers built on
// them.
var processTracing *tracing.Provider

// startTracing starts exporting the process's spans when endpoint is set;
// the returned stop exports what is queued, for a few seconds at most.
func startTracing(endpoint, service string, log *slog.Logger) (func(), error) {
	p, err := tracing.Setup(tracing.Config{Endpoint: endpoint, Service: service}, log)
	if err != nil || p == nil {
		return func() {}, err
	}
	processTracing = p
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.Shutdown(ctx)
	}, nil
}
