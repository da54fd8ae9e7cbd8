package imagecache

import "github.com/ironflow/ironflow/metrics"

// observeAcquire counts an image handed out: a hit when the cache held it
// (for a conversion, the raw disk) before the request, a miss when
// the request waited for a download.
func observeAcquire(hit bool) {
	result := "miss"
	if hit {
		result = "hit"
	}
	metrics.ImageCacheRequests.WithLabelValues(result).Inc()
}

// observeConversion counts a qcow2-to-raw conversion by outcome.
func observeConversion(err error) {
	outcome := metrics.OutcomeOK
	if err != nil {
		outcome = metrics.OutcomeError
	}
	metrics.ImageCacheConversions.WithLabelValues(outcome).Inc()
}
