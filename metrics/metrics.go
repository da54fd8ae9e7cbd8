package metrics

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Registry is the process's registry: Go's runtime and the process's own
// series, ironflow's series below, the Temporal SDK's (TemporalHandler)
// and the node counts (NodeCollector) when the process registers them.
// Serve exports it.
var Registry = prometheus.NewRegistry()

// Buckets. The API's answer in milliseconds to seconds; a BMC call from
// tens of milliseconds to a minute (a power action waits for the state);
// operations and steps from a second to hours (write_image of a large
// image, an operator's wait).
var (
	apiBuckets       = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
	bmcBuckets       = []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}
	heartbeatBuckets = []float64{1, 2.5, 5, 10, 15, 20, 30, 45, 60, 90, 120, 300}
	// OperationBuckets are the buckets of the operation and step
	// histograms the workflows emit (TemporalHandler).
	OperationBuckets = []float64{.1, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400}
	// temporalBuckets are the buckets of the Temporal SDK's own timers
	// (request and task latencies).
	temporalBuckets = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
)

// The API.
var (
	APIRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ironflow_api_requests_total",
		Help: "Requests the API answered, by route template (the path with {placeholders}; unmatched for none), method and HTTP status code.",
	}, []string{"route", "method", "code"})
	APIRequestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "ironflow_api_request_duration_seconds",
		Help:    "Time the API took to answer a request, by route template and method.",
		Buckets: apiBuckets,
	}, []string{"route", "method"})
	// AgentHeartbeatInterval is the time between two heartbeats of one
	// agent, as the API receives them: an agent told to heartbeat every
	// heartbeat_timeout/2 whose intervals grow is lagging.
	AgentHeartbeatInterval = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "ironflow_agent_heartbeat_interval_seconds",
		Help:    "Time between two consecutive heartbeats of the same agent, as the API received them.",
		Buckets: heartbeatBuckets,
	})
)

// The hardware.
var (
	BMCCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ironflow_bmc_calls_total",
		Help: "BMC requests by hardware type (driver), the machine's vendor as its BMC names it (dell, hpe, lenovo, supermicro, ..., other, unknown), action and outcome (ok, unreachable, auth, busy, unsupported, invalid_config, error).",
	}, []string{"driver", "vendor", "action", "outcome"})
	BMCCallDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "ironflow_bmc_call_duration_seconds",
		Help:    "Time a BMC request took, its retries included, by hardware type and action.",
		Buckets: bmcBuckets,
	}, []string{"driver", "action"})
	PowerSyncNodes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ironflow_power_sync_nodes_total",
		Help: "Nodes the power sync read, by conductor group and outcome (in_sync, corrected: the recorded power state was wrong and is fixed, failed: the BMC did not answer).",
	}, []string{"conductor_group", "outcome"})
	PowerSyncLastRun = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "ironflow_power_sync_last_run_timestamp_seconds",
		Help: "Unix time at which this worker last finished a power-sync batch of the conductor group.",
	}, []string{"conductor_group"})
	PowerSyncBatchDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "ironflow_power_sync_batch_duration_seconds",
		Help:    "Time one power-sync batch of a conductor group took.",
		Buckets: bmcBuckets,
	}, []string{"conductor_group"})
	// ReconcileRepairs counts the reconciler's repairs (workflows/reconcile.go):
	// each is also a row of the node's history.
	ReconcileRepairs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ironflow_reconcile_repairs_total",
		Help: "Mismatches between nodes and their workflows the reconciler mended, by conductor group and kind (restart, fail, correct, end_orphan).",
	}, []string{"conductor_group", "kind"})
)

// The boot service.
var (
	ImageCacheRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ironflow_image_cache_requests_total",
		Help: "Image requests the boot service's cache answered, by result (hit: served from the cache, miss: downloaded first).",
	}, []string{"result"})
	ImageCacheDownloadedBytes = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ironflow_image_cache_downloaded_bytes_total",
		Help: "Bytes the image cache downloaded from image sources.",
	})
	ImageCacheConversions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ironflow_image_cache_conversions_total",
		Help: "qcow2 images the cache converted to raw (--force-raw-images), by outcome (ok, error).",
	}, []string{"outcome"})
	DHCPReplies = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ironflow_dhcp_replies_total",
		Help: "DHCP replies the boot service sent, by message type (DHCPv4: offer, ack, nak; DHCPv6: advertise, reply, relay-repl).",
	}, []string{"type"})
	TFTPTransfers = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ironflow_tftp_transfers_total",
		Help: "TFTP read requests, by outcome (ok, not_found, error).",
	}, []string{"outcome"})
	TFTPSentBytes = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ironflow_tftp_sent_bytes_total",
		Help: "Bytes the TFTP server sent.",
	})
	BootHTTPRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ironflow_boot_http_requests_total",
		Help: "Requests the HTTP boot service answered, by kind of file (ipxe, kickstart, images, iso, cache: the image cache, other) and HTTP status code.",
	}, []string{"kind", "code"})
	BootHTTPSentBytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ironflow_boot_http_sent_bytes_total",
		Help: "Bytes the HTTP boot service sent, by kind of file; kind=\"cache\" is the image cache's bytes served.",
	}, []string{"kind"})
)

// Traces (package tracing, docs/tracing.md): spans the process ended and
// exported, or dropped because its bounded queue was full or the collector
// refused or did not answer an export in time.
var (
	TraceSpansExported = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ironflow_trace_spans_exported_total",
		Help: "Spans the OTLP exporter delivered to the collector (--otel-endpoint).",
	})
	TraceSpansDropped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ironflow_trace_spans_dropped_total",
		Help: "Spans not delivered to the collector, by reason (queue_full: the bounded queue was full; export_failed: the collector refused or did not answer in time).",
	}, []string{"reason"})
)

// BuildInfo is 1, labelled with the release and commit the process runs
// (ironflow version): which build serves what, during a rolling upgrade
// (docs/versioning.md).
var BuildInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "ironflow_build_info",
	Help: "1, labelled with the release (VERSION) and commit of the running ironflow binary.",
}, []string{"version", "commit"})

// ironflowCollectors are this package's series, registered at init.
var ironflowCollectors = []prometheus.Collector{
	BuildInfo, APIRequests, APIRequestDuration, AgentHeartbeatInterval,
	BMCCalls, BMCCallDuration, PowerSyncNodes, PowerSyncLastRun, PowerSyncBatchDuration, ReconcileRepairs,
	ImageCacheRequests, ImageCacheDownloadedBytes, ImageCacheConversions,
	DHCPReplies, TFTPTransfers, TFTPSentBytes, BootHTTPRequests, BootHTTPSentBytes,
	TraceSpansExported, TraceSpansDropped,
}

func init() {
	Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	Registry.MustRegister(ironflowCollectors...)
}

// BMC outcomes: the bmc package's typed errors (bmc/bmc.go), as labels.
// The caller classifies (this package imports nothing of ironflow's).
const (
	OutcomeOK            = "ok"
	OutcomeUnreachable   = "unreachable"
	OutcomeAuth          = "auth"
	OutcomeBusy          = "busy"
	OutcomeUnsupported   = "unsupported"
	OutcomeInvalidConfig = "invalid_config"
	OutcomeError         = "error"
)

// ObserveBMC records one BMC request of driver to a machine of vendor (a
// word of a fixed set: bmc.Vendors): its action, outcome and duration
// since start.
func ObserveBMC(driver, vendor, action, outcome string, start time.Time) {
	BMCCalls.WithLabelValues(driver, vendor, action, outcome).Inc()
	BMCCallDuration.WithLabelValues(driver, action).Observe(time.Since(start).Seconds())
}

// ErrorOutcome is the outcome of err among typed errors: the first of
// classes (outcome → sentinel) that err wraps, else OutcomeError; nil is
// OutcomeOK.
func ErrorOutcome(err error, classes []ErrorClass) string {
	if err == nil {
		return OutcomeOK
	}
	for _, c := range classes {
		if errors.Is(err, c.Err) {
			return c.Outcome
		}
	}
	return OutcomeError
}

// ErrorClass names the outcome label of the errors that wrap Err.
type ErrorClass struct {
	Outcome string
	Err     error
}
