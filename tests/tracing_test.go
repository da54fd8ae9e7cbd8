package tests

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/embedded"
	"github.com/ironflow/ironflow/internal/testkit/otlpsink"
)

// labTraces receives the lab's traces (--otel-endpoint of its API and
// worker).
var labTraces *otlpsink.Sink

// checkDeployTrace: the deploy of node uuid (TestDeployAndUndeployWithSimulatedAgent
// runs one through the baremetal CLI) is one trace at the lab's collector:
// the API's request span (with its request id), the workflow's span under
// it, each step's span under the workflow's, and the agent's image write
// under the write_image step. (The client's global request id is
// apiserver's TestRequestSpanAndLogCarryTheRequestIDs.)
func checkDeployTrace(t *testing.T, uuid string) {
	t.Helper()
	var trace []otlpsink.Span
	find := func(name string) (otlpsink.Span, bool) {
		for _, s := range trace {
			if s.Name == name {
				return s, true
			}
		}
		return otlpsink.Span{}, false
	}
	var wf otlpsink.Span
	deadline := time.Now().Add(20 * time.Second)
	for {
		for _, s := range labTraces.Spans() {
			if s.Name == "RunWorkflow:DeployNode" && strings.Contains(s.Attributes["temporalWorkflowID"], uuid) {
				wf = s
			}
		}
		trace = labTraces.Trace(wf.TraceID)
		_, write := find("agent image write")
		if wf.SpanID != "" && write {
			break
		}
		if time.Now().After(deadline) {
			names := []string{}
			for _, s := range trace {
				names = append(names, s.Name)
			}
			t.Fatalf("no deploy trace of node %s within 20s: workflow span %+v, its trace %v", uuid, wf, names)
		}
		time.Sleep(200 * time.Millisecond)
	}
	byID := map[string]otlpsink.Span{}
	for _, s := range trace {
		byID[s.SpanID] = s
	}
	// descends reports whether s has anc among its ancestors.
	descends := func(s, anc otlpsink.Span) bool {
		for i := 0; i < 50 && s.Parent != ""; i++ {
			if s.Parent == anc.SpanID {
				return true
			}
			s = byID[s.Parent]
		}
		return false
	}
	request, ok := find("PUT /v1/nodes/:node/states/provision")
	if !ok || request.Service != "ironflow-api" || request.Parent != "" || !strings.HasPrefix(request.Attributes["openstack.request_id"], "req-") {
		t.Fatalf("deploy request span %+v: want the root span of ironflow-api with a request id", request)
	}
	if wf.Service != "ironflow-worker" || !descends(wf, request) {
		t.Errorf("workflow span %+v is not the worker's, under the request span", wf)
	}
	var steps []string
	for _, s := range trace {
		if strings.HasPrefix(s.Name, "step deploy ") {
			steps = append(steps, s.Name)
			if !descends(s, wf) {
				t.Errorf("step span %s is not under the workflow span", s.Name)
			}
		}
	}
	writeStep, ok := find("step deploy deploy.write_image")
	if !ok || len(steps) < 2 {
		t.Fatalf("deploy step spans %v: want write_image and the other steps", steps)
	}
	write, _ := find("agent image write")
	if write.Parent != writeStep.SpanID {
		t.Errorf("agent image write span %+v is not the child of the write_image step span", write)
	}
	if write.Attributes["ironflow.agent.command_status"] != "SUCCEEDED" || write.Attributes["ironflow.image.bytes_written"] == "" {
		t.Errorf("agent image write span attributes %v", write.Attributes)
	}
	t.Logf("deploy trace: %d spans, steps %v", len(trace), steps)
}

// TestBlackHoledCollectorDoesNotDelayTheAPI: an API whose collector
// accepts connections and never answers answers its requests as fast as
// ever, and counts the spans it could not deliver.
func TestBlackHoledCollectorDoesNotDelayTheAPI(t *testing.T) {
	hole, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hole.Close()
	go func() {
		var held []net.Conn // never read, never closed until the test ends
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := hole.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	port, err := embedded.FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr, _, err := freeMetricsAddresses()
	if err != nil {
		t.Fatal(err)
	}
	apiURL := fmt.Sprintf("http://127.0.0.1:%d", port)
	api, err := lab.Spawn("ironflow-api-blackhole", append(lab.APIArgs(fmt.Sprintf("127.0.0.1:%d", port)),
		"--otel-endpoint", hole.Addr().String(), "--metrics-listen", metricsAddr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.Kill)
	waitFor(t, "the black-holed API", 30*time.Second, func() bool {
		r, err := http.Get(apiURL + "/v1")
		if err == nil {
			r.Body.Close()
		}
		return err == nil && r.StatusCode == 200
	})
	dropped := func() float64 {
		r, err := http.Get("http://" + metricsAddr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		var sum float64
		body, _ := io.ReadAll(r.Body)
		for _, line := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(line, "ironflow_trace_spans_dropped_total{") {
				f := strings.Fields(line)
				v, _ := strconv.ParseFloat(f[len(f)-1], 64)
				sum += v
			}
		}
		return sum
	}
	before := dropped()
	var slowest time.Duration
	deadline := time.Now().Add(20 * time.Second)
	for n := 0; ; n++ {
		start := time.Now()
		code, _ := callAt(t, apiURL, "1.78", "GET", "/v1/nodes?limit=1", nil, nil)
		if d := time.Since(start); d > slowest {
			slowest = d
		}
		if code != 200 {
			t.Fatalf("GET /v1/nodes: %d", code)
		}
		if n >= 50 && dropped() > before {
			t.Logf("%d requests, slowest %v, spans dropped %v", n+1, slowest, dropped()-before)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no span counted dropped within 20s of requests to a black-holed collector (%d requests)", n+1)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The export's timeout is 5 s: a request that waited for it would show.
	if slowest > time.Second {
		t.Errorf("the slowest request took %v while the collector black-holed", slowest)
	}
}
