package metrics

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"
)

// TemporalHandler is the Temporal SDK's metrics handler
// (client.Options.MetricsHandler) on the process's registry: the SDK's own
// worker and client series (Temporal's "SDK metrics" reference:
// temporal_request, temporal_workflow_task_execution_latency, ...) and what
// the workflows emit through workflow.GetMetricsHandler, which the SDK
// wraps so that nothing is emitted while a workflow replays its history.
//
// The SDK names a metric once and tags it at will, so the series are kept
// here and handed to Prometheus as they are at each scrape. Counters get
// Prometheus's _total suffix, timers become histograms in seconds
// (_seconds), gauges keep their name.
type TemporalHandler struct {
	set  *temporalSet
	tags map[string]string
}

// NewTemporalHandler registers the SDK's series with Registry. help gives
// the help text of the workflows' own metrics by their Prometheus name
// (workflows.MetricHelp); the SDK's get a pointer to Temporal's reference.
func NewTemporalHandler(help map[string]string) *TemporalHandler {
	return newTemporalHandler(Registry, help)
}

func newTemporalHandler(reg prometheus.Registerer, help map[string]string) *TemporalHandler {
	s := &temporalSet{help: help, families: map[string]*family{}}
	reg.MustRegister(s)
	return &TemporalHandler{set: s}
}

var _ client.MetricsHandler = (*TemporalHandler)(nil)

// WithTags returns a handler whose series carry tags too.
func (h *TemporalHandler) WithTags(tags map[string]string) client.MetricsHandler {
	t := maps.Clone(h.tags)
	if t == nil {
		t = map[string]string{}
	}
	maps.Copy(t, tags)
	return &TemporalHandler{set: h.set, tags: t}
}

// Counter is name_total.
func (h *TemporalHandler) Counter(name string) client.MetricsCounter {
	s := h.set.series(promName(name, kindCounter), kindCounter, h.tags)
	return client.MetricsCounter(counterFunc(func(d int64) { s.add(float64(d)) }))
}

// Gauge is name.
func (h *TemporalHandler) Gauge(name string) client.MetricsGauge {
	s := h.set.series(promName(name, kindGauge), kindGauge, h.tags)
	return client.MetricsGauge(gaugeFunc(s.set))
}

// Timer is the histogram name_seconds.
func (h *TemporalHandler) Timer(name string) client.MetricsTimer {
	s := h.set.series(promName(name, kindTimer), kindTimer, h.tags)
	return client.MetricsTimer(timerFunc(func(d time.Duration) { s.observe(d.Seconds()) }))
}

type counterFunc func(int64)

func (f counterFunc) Inc(d int64) { f(d) }

type gaugeFunc func(float64)

func (f gaugeFunc) Update(v float64) { f(v) }

type timerFunc func(time.Duration)

func (f timerFunc) Record(d time.Duration) { f(d) }

type kind int

const (
	kindCounter kind = iota
	kindGauge
	kindTimer
)

// promName is the Prometheus name of an SDK metric of kind k.
func promName(name string, k kind) string {
	name = sanitize(name)
	switch k {
	case kindCounter:
		if !strings.HasSuffix(name, "_total") {
			name += "_total"
		}
	case kindTimer:
		if !strings.HasSuffix(name, "_seconds") {
			name += "_seconds"
		}
	}
	return name
}

// sanitize keeps what Prometheus allows in a metric or label name.
func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		ok := c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9'
		if !ok {
			b[i] = '_'
		}
	}
	return string(b)
}

// temporalSet is every series the handlers made: a prometheus.Collector
// that describes nothing up front (the SDK's names and tags are known only
// when it uses them).
type temporalSet struct {
	help     map[string]string
	mu       sync.Mutex
	families map[string]*family
}

type family struct {
	kind    kind
	help    string
	buckets []float64
	series  map[string]*series
}

type series struct {
	desc    *prometheus.Desc
	values  []string
	mu      sync.Mutex
	value   float64  // counter, gauge
	counts  []uint64 // timer: per bucket (the last +Inf), not cumulative
	buckets []float64
	count   uint64
	sum     float64
}

func (t *temporalSet) series(name string, k kind, tags map[string]string) *series {
	keys := slices.Sorted(maps.Keys(tags))
	names := make([]string, len(keys))
	values := make([]string, len(keys))
	var id strings.Builder
	for i, key := range keys {
		names[i], values[i] = sanitize(key), tags[key]
		id.WriteString(names[i] + "\x00" + values[i] + "\x00")
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.families[name]
	if f == nil {
		help := t.help[name]
		if help == "" {
			help = "Temporal SDK metric (Temporal's SDK metrics reference)."
		}
		buckets := temporalBuckets
		if strings.HasPrefix(name, "ironflow_") {
			buckets = OperationBuckets
		}
		f = &family{kind: k, help: help, buckets: buckets, series: map[string]*series{}}
		t.families[name] = f
	}
	s := f.series[id.String()]
	if s == nil {
		s = &series{desc: prometheus.NewDesc(name, f.help, names, nil), values: values}
		if k == kindTimer {
			s.counts, s.buckets = make([]uint64, len(f.buckets)+1), f.buckets
		}
		f.series[id.String()] = s
	}
	return s
}

func (s *series) add(d float64) {
	s.mu.Lock()
	s.value += d
	s.mu.Unlock()
}

func (s *series) set(v float64) {
	s.mu.Lock()
	s.value = v
	s.mu.Unlock()
}

func (s *series) observe(v float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.count++
	s.sum += v
	s.counts[len(s.counts)-1]++ // +Inf, replaced below when a bucket holds v
	for i := range s.counts[:len(s.counts)-1] {
		if v <= s.buckets[i] {
			s.counts[len(s.counts)-1]--
			s.counts[i]++
			break
		}
	}
}

// Describe sends nothing: the collector is unchecked.
func (t *temporalSet) Describe(chan<- *prometheus.Desc) {}

// Collect hands Prometheus every series as it is now.
func (t *temporalSet) Collect(ch chan<- prometheus.Metric) {
	t.mu.Lock()
	names := slices.Sorted(maps.Keys(t.families))
	fams := make([]*family, len(names))
	for i, n := range names {
		fams[i] = t.families[n]
	}
	all := make([][]*series, len(fams))
	for i, f := range fams {
		keys := slices.Sorted(maps.Keys(f.series))
		for _, k := range keys {
			all[i] = append(all[i], f.series[k])
		}
	}
	t.mu.Unlock()
	for i, f := range fams {
		for _, s := range all[i] {
			s.mu.Lock()
			switch f.kind {
			case kindCounter:
				ch <- prometheus.MustNewConstMetric(s.desc, prometheus.CounterValue, s.value, s.values...)
			case kindGauge:
				ch <- prometheus.MustNewConstMetric(s.desc, prometheus.GaugeValue, s.value, s.values...)
			case kindTimer:
				cum := map[float64]uint64{}
				var n uint64
				for j, ub := range f.buckets {
					n += s.counts[j]
					cum[ub] = n
				}
				ch <- prometheus.MustNewConstHistogram(s.desc, s.count, s.sum, cum, s.values...)
			}
			s.mu.Unlock()
		}
	}
}
