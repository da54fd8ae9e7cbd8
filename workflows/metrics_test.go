package workflows

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"
)

// capturedMetrics is a metrics handler that keeps what the workflows emit:
// counters summed and timers listed, by name and the tags this package
// sets (the SDK's own tags and metrics are left out).
type capturedMetrics struct {
	mu     *sync.Mutex
	tags   map[string]string
	counts map[string]int64
	timers map[string][]time.Duration
}

func newCapturedMetrics() *capturedMetrics {
	return &capturedMetrics{mu: &sync.Mutex{}, counts: map[string]int64{}, timers: map[string][]time.Duration{}}
}

func (c *capturedMetrics) key(name string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(c.tags)) {
		switch k {
		case "operation", "outcome", "step", "failure_class", "state":
			parts = append(parts, k+"="+c.tags[k])
		}
	}
	return name + "{" + strings.Join(parts, ",") + "}"
}

func (c *capturedMetrics) WithTags(t map[string]string) client.MetricsHandler {
	n := *c
	n.tags = maps.Clone(c.tags)
	if n.tags == nil {
		n.tags = map[string]string{}
	}
	maps.Copy(n.tags, t)
	return &n
}

type countFn func(int64)

func (f countFn) Inc(d int64) { f(d) }

type gaugeFn func(float64)

func (f gaugeFn) Update(float64) {}

type timerFn func(time.Duration)

func (f timerFn) Record(d time.Duration) { f(d) }

func (c *capturedMetrics) Counter(name string) client.MetricsCounter {
	return countFn(func(d int64) {
		if strings.HasPrefix(name, "ironflow_") {
			c.mu.Lock()
			c.counts[c.key(name)] += d
			c.mu.Unlock()
		}
	})
}

func (c *capturedMetrics) Gauge(string) client.MetricsGauge { return gaugeFn(nil) }

func (c *capturedMetrics) Timer(name string) client.MetricsTimer {
	return timerFn(func(d time.Duration) {
		if strings.HasPrefix(name, "ironflow_") {
			c.mu.Lock()
			c.timers[c.key(name)] = append(c.timers[c.key(name)], d)
			c.mu.Unlock()
		}
	})
}

func newMeteredEnv(f *fakeCloud, m *capturedMetrics) *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	s.SetMetricsHandler(m)
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(DeployNode)
	f.register(env)
	return env
}

// A deploy emits its start, its end and each step's duration once, in
// workflow time: what the Prometheus histograms of docs/metrics.md hold.
func TestDeployNodeEmitsOperationAndStepMetrics(t *testing.T) {
	f := newFakeCloud()
	m := newCapturedMetrics()
	env := newMeteredEnv(f, m)
	heartbeatAfter(env, 2*time.Minute)
	env.ExecuteWorkflow(DeployNode, deployRequest())
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
	}
	for k, want := range map[string]int64{
		metricOperationsStarted + "{operation=deploy}":                    1,
		metricOperationsFinished + "{operation=deploy,outcome=succeeded}": 1,
	} {
		if m.counts[k] != want {
			t.Errorf("%s = %d, want %d (all: %v)", k, m.counts[k], want, m.counts)
		}
	}
	d := m.timers[metricOperationDuration+"{operation=deploy,outcome=succeeded}"]
	if len(d) != 1 || d[0] < 2*time.Minute {
		t.Errorf("operation duration: %v, want one of at least the 2 minutes the agent took to call back", d)
	}
	for _, step := range []string{"deploy.deploy", "deploy.write_image", "deploy.prepare_instance_boot", "deploy.tear_down_agent", "deploy.boot_instance"} {
		k := fmt.Sprintf("%s{operation=deploy,outcome=ok,step=%s}", metricStepDuration, step)
		if len(m.timers[k]) != 1 {
			t.Errorf("%s: %v, want one duration (all: %v)", k, m.timers[k], slices.Sorted(maps.Keys(m.timers)))
		}
	}
}

// A callback that never comes counts a callback timeout and a failed
// deploy step.
func TestDeployNodeCallbackTimeoutIsCounted(t *testing.T) {
	f := newFakeCloud()
	m := newCapturedMetrics()
	env := newMeteredEnv(f, m)
	env.ExecuteWorkflow(DeployNode, deployRequest())
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
	}
	if got := m.counts[metricCallbackTimeouts+"{state=wait call-back}"]; got != 1 {
		t.Errorf("callback timeouts: %d, want 1 (all: %v)", got, m.counts)
	}
	failures := int64(0)
	for k, n := range m.counts {
		if strings.HasPrefix(k, metricStepFailures+"{") && strings.Contains(k, "operation=deploy") {
			failures += n
		}
	}
	if failures != 1 {
		t.Errorf("step failures: %d, want 1 (all: %v)", failures, m.counts)
	}
	var finished []string
	for k := range m.counts {
		if strings.HasPrefix(k, metricOperationsFinished) {
			finished = append(finished, k)
		}
	}
	if len(finished) != 1 || strings.Contains(finished[0], "succeeded") {
		t.Errorf("finished: %v, want one that did not succeed", finished)
	}
}
