package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// serverCalls counts what a workload asks of the Temporal server, read off
// its Prometheus counters: "rpc <service>/<operation>" for the requests its
// frontend, history and matching services serve (service_requests), "db
// <service>/<operation>" for the calls they make to their store
// (persistence_requests). Summed over namespaces.
type serverCalls map[string]float64

// callCounters are the Prometheus counters serverCalls reads, by prefix.
var callCounters = map[string]string{
	"service_requests":     "rpc",
	"persistence_requests": "db",
}

// parseServerCalls reads the counters from a Prometheus text exposition.
func parseServerCalls(r io.Reader) (serverCalls, error) {
	out := serverCalls{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		brace := strings.IndexByte(line, '{')
		if brace < 0 || strings.HasPrefix(line, "#") {
			continue
		}
		prefix, ok := callCounters[line[:brace]]
		if !ok {
			continue
		}
		end := strings.LastIndexByte(line, '}')
		if end < brace {
			continue
		}
		labels := parseLabels(line[brace+1 : end])
		v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err != nil || labels["operation"] == "" {
			continue
		}
		out[prefix+" "+labels["service_name"]+"/"+labels["operation"]] += v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read Temporal metrics: %w", err)
	}
	return out, nil
}

// parseLabels reads name="value" pairs (values without escaped quotes, as
// Temporal's labels are).
func parseLabels(s string) map[string]string {
	out := map[string]string{}
	for s != "" {
		eq := strings.IndexByte(s, '=')
		if eq < 0 || eq+1 >= len(s) || s[eq+1] != '"' {
			break
		}
		name := strings.TrimLeft(s[:eq], ", ")
		rest := s[eq+2:]
		q := strings.IndexByte(rest, '"')
		if q < 0 {
			break
		}
		out[name] = rest[:q]
		s = rest[q+1:]
	}
	return out
}

// metricsFlush is how long the server's counters may lag behind its work:
// its metrics reporter publishes them on an interval, so a workload's
// counters are read this long after what ran before it ended, and again
// this long after it ended itself (the server idle both times).
const metricsFlush = 2 * time.Second

// serverCallsBefore reads the counters before a workload, once what ran
// before it has been published (metricsFlush); nil without them.
func (s *stack) serverCallsBefore(ctx context.Context) serverCalls {
	if s.metricsURL() == "" {
		return nil
	}
	return s.serverCallsAfter(ctx, serverCalls{})
}

// metricsURL is the dev server's metrics endpoint ("" for the cluster's).
func (s *stack) metricsURL() string {
	if s.cluster != nil || s.Stack == nil || s.Temporal == nil {
		return ""
	}
	return s.Temporal.MetricsURL()
}

// serverCallsAfter reads the counters once the last of a workload's
// requests has been published (metricsFlush); nil when before is.
func (s *stack) serverCallsAfter(ctx context.Context, before serverCalls) serverCalls {
	if before == nil {
		return nil
	}
	select {
	case <-ctx.Done():
		return nil
	case <-time.After(metricsFlush):
	}
	return s.serverCalls(ctx)
}

// serverCalls reads the dev server's counters now; nil where the stack has
// no metrics endpoint (the cluster's) or it does not answer, so that a
// measure without them is left out rather than wrong.
func (s *stack) serverCalls(ctx context.Context) serverCalls {
	url := s.metricsURL()
	if url == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil
	}
	resp, err := s.http.Do(req)
	if err != nil {
		s.log.Warn("read Temporal metrics", "err", err)
		return nil
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		s.log.Warn("read Temporal metrics", "status", resp.Status)
		return nil
	}
	c, err := parseServerCalls(resp.Body)
	if err != nil {
		s.log.Warn("read Temporal metrics", "err", err)
		return nil
	}
	return c
}

// per is what happened between before and c, per one of n units; nil when
// either snapshot is missing.
func (c serverCalls) per(before serverCalls, n int) serverCalls {
	if c == nil || before == nil || n <= 0 {
		return nil
	}
	out := serverCalls{}
	for k, v := range c {
		if d := (v - before[k]) / float64(n); d > 0 {
			out[k] = d
		}
	}
	return out
}

// total sums the counts of one prefix ("rpc", "db").
func (c serverCalls) total(prefix string) float64 {
	var t float64
	for k, v := range c {
		if strings.HasPrefix(k, prefix+" ") {
			t += v
		}
	}
	return t
}

// mean is the mean of several per-unit counts.
func meanCalls(cs []serverCalls) serverCalls {
	var n int
	out := serverCalls{}
	for _, c := range cs {
		if c == nil {
			continue
		}
		n++
		for k, v := range c {
			out[k] += v
		}
	}
	if n == 0 {
		return nil
	}
	for k := range out {
		out[k] /= float64(n)
	}
	return out
}

// moreThan names the k operations of one prefix where c exceeds base most,
// "+2.0 db history/UpdateWorkflowExecution (4.0 vs 2.0)", largest first.
func (c serverCalls) moreThan(base serverCalls, prefix string, k int) string {
	type diff struct {
		key  string
		d, v float64
	}
	var ds []diff
	seen := map[string]bool{}
	for key := range c {
		seen[key] = true
	}
	for key := range base {
		seen[key] = true
	}
	for key := range seen {
		if !strings.HasPrefix(key, prefix+" ") {
			continue
		}
		if d := c[key] - base[key]; d >= 0.05 || d <= -0.05 {
			ds = append(ds, diff{key, d, c[key]})
		}
	}
	sort.Slice(ds, func(i, j int) bool {
		if ds[i].d != ds[j].d {
			return ds[i].d > ds[j].d
		}
		return ds[i].key < ds[j].key
	})
	if len(ds) > k {
		ds = ds[:k]
	}
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = fmt.Sprintf("%+.1f %s (%.1f vs %.1f)", d.d, strings.TrimPrefix(d.key, prefix+" "), d.v, d.v-d.d)
	}
	if len(parts) == 0 {
		return "no operation differs by 0.05 or more"
	}
	return strings.Join(parts, "; ")
}

// String lists every count, largest first (for -v logs).
func (c serverCalls) String() string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if c[keys[i]] != c[keys[j]] {
			return c[keys[i]] > c[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%.2f", k, c[k])
	}
	return strings.Join(parts, " ")
}
