package tests

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/agent/sim"
	"github.com/ironflow/ironflow/embedded"
	"github.com/ironflow/ironflow/internal/testkit/otlpsink"
)

// labTraces receives the lab's traces (--otel-endpoint of its API and
// worker).
var labTraces *otlpsink.Sink

// TestDeployTraceIsConnected: one deploy with a simulated agent is one
// trace at the collector: the API's request span (with Ironic's request id
// and the client's as global request id), the workflow's span under it,
// each step's span under the workflow's, and the agent's image write
// under the write_image step.
func TestDeployTraceIsConnected(t *testing.T) {
	img := newImageServer(t, 4<<20)
	uuid := enrollAgentNode(t, "trace-node-0", "52:54:00:bb:0e:01", img)
	startSimMachine(t, uuid, []string{"52:54:00:bb:0e:01"}, sim.Config{})
	mustCLI(t, "node", "manage", uuid, "--wait", "60")
	mustCLI(t, "node", "provide", uuid, "--wait", "120")

	const global = "req-0123abcd-0000-4000-8000-00000000beef"
	req, _ := http.NewRequest("PUT", lab.APIURL+"/v1/nodes/"+uuid+"/states/provision", bytes.NewReader([]byte(`{"target": "active"}`)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-OpenStack-Ironic-API-Version", "1.78")
	req.Header.Set("X-OpenStack-Request-Id", global)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	id := resp.Header.Get("Openstack-Request-Id")
	if resp.StatusCode != http.StatusAccepted || !strings.HasPrefix(id, "req-") || id == global {
		t.Fatalf("deploy: %d, request id %q (Ironic answers with its own id, not the client's %q)", resp.StatusCode, id, global)
	}
	waitState(t, uuid, "active", 3*time.Minute)

	var request otlpsink.Span
	var trace []otlpsink.Span
	find := func(name string) (otlpsink.Span, bool) {
		for _, s := range trace {
			if s.Name == name {
				return s, true
			}
		}
		return otlpsink.Span{}, false
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		for _, s := range labTraces.Spans() {
			if s.Attributes["openstack.request_id"] == id {
				request = s
			}
		}
		trace = labTraces.Trace(request.TraceID)
		_, wf := find("RunWorkflow:DeployNode")
		_, write := find("agent image write")
		if request.SpanID != "" && wf && write {
			break
		}
		if time.Now().After(deadline) {
			names := []string{}
			for _, s := range trace {
				names = append(names, s.Name)
			}
			t.Fatalf("no connected deploy trace within 20s: request span %+v, its trace %v", request, names)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if request.Service != "ironflow-api" || request.Attributes["openstack.global_request_id"] != global || request.Parent != "" {
		t.Errorf("request span %+v: want a root span of ironflow-api with global request id %s", request, global)
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
	wf, _ := find("RunWorkflow:DeployNode")
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
	if write.Attributes["ironflow.agent.command_status"] != "SUCCEEDED" {
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
