// Package metrics holds ironflow's Prometheus metrics: the process's
// registry, every ironflow_* series the API, the worker and the boot service
// export, the bridge that turns the Temporal SDK's metrics (and the
// workflows' own, emitted through workflow.GetMetricsHandler) into
// Prometheus series, the collector of the fleet's node counts, and the
// --metrics-listen server that serves them.
//
// Names and labels follow Prometheus's naming documentation ("Metric and
// label naming"): base units (seconds, bytes), _total on counters, and no
// label whose values grow with the fleet on a series that changes often:
// no node UUID, no MAC, no URL. docs/metrics.md lists every series and the
// alerts built on them.
//
// The package imports nothing of ironflow's, so that the packages it
// measures (bmc, pxe, imagecache, apiserver) may import it. It never blocks
// the caller: an observation is an atomic add.
package metrics
