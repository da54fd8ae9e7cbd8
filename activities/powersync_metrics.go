package activities

import (
	"time"

	"github.com/ironflow/ironflow/metrics"
)

// observePowerSync records a power-sync batch: each node's outcome
// (in_sync, corrected: a drift between the recorded and the real power
// state, fixed; failed), its duration, and, when the batch ended without a
// store failure, the time it finished, whose age is the sync's lag
// (docs/metrics.md).
func observePowerSync(group string, start time.Time, outcomes []nodeOutcome, err error) {
	for _, o := range outcomes {
		label := ""
		switch o.what {
		case outUnchanged:
			label = "in_sync"
		case outChanged, outRecovered:
			label = "corrected"
		case outFailed, outMaintenance:
			label = "failed"
		default:
			continue
		}
		metrics.PowerSyncNodes.WithLabelValues(group, label).Inc()
	}
	metrics.PowerSyncBatchDuration.WithLabelValues(group).Observe(time.Since(start).Seconds())
	if err == nil {
		metrics.PowerSyncLastRun.WithLabelValues(group).SetToCurrentTime()
	}
}
