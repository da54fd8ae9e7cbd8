package main

import (
	"context"
	"log/slog"
	"sync"

	"go.temporal.io/sdk/client"

	"github.com/ironflow/ironflow"
	"github.com/ironflow/ironflow/metrics"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// Default metrics addresses (docs/metrics.md): loopback, off the public
// API's port, one per command so that an API, a worker and a boot service
// on one machine each serve theirs; ironflow dev serves all three parts'
// on the API's.
const (
	defaultAPIMetricsListen    = "127.0.0.1:9608"
	defaultWorkerMetricsListen = "127.0.0.1:9609"
	defaultPXEMetricsListen    = "127.0.0.1:9610"
)

// addMetricsListen is the --metrics-listen flag of a command.
func addMetricsListen(s *settings, def string) *string {
	return s.String("metrics-listen", def, "where Prometheus scrapes this process's metrics (/metrics; empty: none; docs/metrics.md)")
}

// temporalMetrics is the process's Temporal SDK metrics handler: every
// Temporal client (and the workers built on it) reports through it.
var temporalMetrics = sync.OnceValue(func() client.MetricsHandler {
	return metrics.NewTemporalHandler(workflows.MetricHelp)
})

// serveMetrics starts the metrics endpoint of a process that holds the
// inventory (st not nil: the API, ironflow dev), which also exports the
// fleet's node counts.
func serveMetrics(ctx context.Context, addr string, st *store.Store, log *slog.Logger) (string, error) {
	if st != nil && addr != "" {
		metrics.RegisterNodeCollector(nodeCounter(st), log.With("component", "metrics"))
	}
	metrics.BuildInfo.WithLabelValues(ironflow.Version(), ironflow.Commit()).Set(1)
	return metrics.Serve(ctx, addr, log)
}

// nodeCounter reads the fleet's counts from the store.
func nodeCounter(st *store.Store) metrics.NodeCounter {
	return func(ctx context.Context) ([]metrics.NodeGroup, error) {
		counts, err := st.CountNodesByState(ctx)
		if err != nil {
			return nil, err
		}
		out := make([]metrics.NodeGroup, len(counts))
		for i, c := range counts {
			out[i] = metrics.NodeGroup{ProvisionState: c.ProvisionState, ConductorGroup: c.ConductorGroup,
				Maintenance: c.Maintenance, Fault: c.Fault, Health: c.Health, Failed: provision.State(c.ProvisionState).Failed(), Count: c.Count}
		}
		return out, nil
	}
}

// metricsURL is the scrape URL of a metrics address ("" for none).
func metricsURL(addr string) string {
	if addr == "" {
		return ""
	}
	return "http://" + addr + "/metrics"
}
