package main

import (
	"strings"
	"testing"
)

const metricsSample = `# HELP service_requests service_requests counter
# TYPE service_requests counter
service_requests{namespace="default",operation="StartWorkflowExecution",service_name="frontend"} 10
service_requests{namespace="system",operation="StartWorkflowExecution",service_name="frontend"} 2
service_requests{namespace="default",operation="RecordWorkflowTaskStarted",service_name="history"} 7
persistence_requests{namespace="default",operation="UpdateWorkflowExecution",service_name="history"} 30
persistence_requests{operation="GetTransferTasks",service_name="history"} 4
service_latency_bucket{operation="StartWorkflowExecution",service_name="frontend",le="0.1"} 99
persistence_requests{namespace="default",service_name="history"} 5
`

func TestParseServerCallsSumsNamespacesAndKeepsOnlyTheCounters(t *testing.T) {
	c, err := parseServerCalls(strings.NewReader(metricsSample))
	if err != nil {
		t.Fatal(err)
	}
	want := serverCalls{
		"rpc frontend/StartWorkflowExecution":   12,
		"rpc history/RecordWorkflowTaskStarted": 7,
		"db history/UpdateWorkflowExecution":    30,
		"db history/GetTransferTasks":           4,
	}
	if len(c) != len(want) {
		t.Fatalf("parsed %v, want %v", c, want)
	}
	for k, v := range want {
		if c[k] != v {
			t.Errorf("%s = %v, want %v", k, c[k], v)
		}
	}
	if got := c.total("db"); got != 34 {
		t.Errorf("db total %v, want 34", got)
	}
}

func TestServerCallsPerUnitAndWhereOneAsksMore(t *testing.T) {
	before := serverCalls{"db history/UpdateWorkflowExecution": 10, "rpc frontend/StartWorkflowExecution": 5}
	after := serverCalls{"db history/UpdateWorkflowExecution": 50, "rpc frontend/StartWorkflowExecution": 15, "db history/AppendHistoryNodes": 20}
	per := after.per(before, 10)
	if per["db history/UpdateWorkflowExecution"] != 4 || per["rpc frontend/StartWorkflowExecution"] != 1 || per["db history/AppendHistoryNodes"] != 2 {
		t.Fatalf("per deploy %v", per)
	}
	if serverCalls(nil).per(before, 10) != nil || after.per(nil, 10) != nil {
		t.Error("a missing snapshot must give no figure")
	}
	base := serverCalls{"db history/UpdateWorkflowExecution": 3, "db history/AppendHistoryNodes": 2}
	got := per.moreThan(base, "db", 5)
	if got != "+1.0 history/UpdateWorkflowExecution (4.0 vs 3.0)" {
		t.Errorf("moreThan = %q", got)
	}
	if m := meanCalls([]serverCalls{{"x": 2}, nil, {"x": 4}}); m["x"] != 3 {
		t.Errorf("mean %v", m)
	}
}
