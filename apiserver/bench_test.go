package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/ironflow/ironflow/store"
)

// benchNodes is the fleet size a detailed list must handle in one query.
const benchNodes = 10000

// BenchmarkListNodesDetail lists 10,000 nodes with every field: one store
// query, rendered without per-node lookups.
func BenchmarkListNodesDetail(b *testing.B) {
	e := newEnv(b, func(c *Config) { c.MaxLimit = benchNodes })
	ctx := context.Background()
	for i := 0; i < benchNodes; i++ {
		name := fmt.Sprintf("bench-%05d", i)
		n := &store.Node{
			Name: &name, Driver: "ipmi", ProvisionState: "available",
			DriverInfo:   map[string]any{"ipmi_address": "127.0.0.1", "ipmi_password": "secret", "deploy_kernel": "http://127.0.0.1/k"},
			Properties:   map[string]any{"cpus": 8, "memory_mb": 32768, "local_gb": 100, "cpu_arch": "x86_64"},
			InstanceInfo: map[string]any{"image_source": "http://127.0.0.1/img.qcow2"},
		}
		if err := e.st.CreateNode(ctx, n); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rec := e.serve("GET", fmt.Sprintf("/v1/nodes/detail?limit=%d", benchNodes), "1.78", nil)
		if rec.Code != http.StatusOK {
			b.Fatalf("list: %d %s", rec.Code, rec.Body.String())
		}
		b.SetBytes(int64(rec.Body.Len()))
	}
}

// BenchmarkHeartbeatDuringAgentStep is the common heartbeat: the node is
// deploying, its workflow was signalled recently, so the heartbeat is
// validated and recorded. The baseline is the store write alone.
func BenchmarkHeartbeatDuringAgentStep(b *testing.B) {
	e := newEnv(b)
	ctx := context.Background()
	n := &store.Node{Driver: "fake-hardware", ProvisionState: "deploying",
		DriverInternalInfo: map[string]any{"agent_secret_token": "bench-token", "agent_url": "http://127.0.0.1:9999"}}
	if err := e.st.CreateNode(ctx, n); err != nil {
		b.Fatal(err)
	}
	e.eng.hold(n.UUID, true)
	body := []byte(`{"callback_url": "http://127.0.0.1:9999", "agent_token": "bench-token", "agent_version": "bench"}`)
	b.Run("heartbeat", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if rec := e.serve("POST", "/v1/heartbeat/"+n.UUID, "1.78", body); rec.Code != http.StatusAccepted {
				b.Fatalf("heartbeat: %d %s", rec.Code, rec.Body.String())
			}
		}
	})
	b.Run("heartbeat-parallel", func(b *testing.B) {
		b.SetParallelism(16)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if rec := e.serve("POST", "/v1/heartbeat/"+n.UUID, "1.78", body); rec.Code != http.StatusAccepted {
					b.Errorf("heartbeat: %d %s", rec.Code, rec.Body.String())
					return
				}
			}
		})
	})
	b.Run("baseline-store-merge-parallel", func(b *testing.B) {
		b.SetParallelism(16)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := e.st.MergeDriverInternalInfo(ctx, n.UUID, map[string]any{"agent_last_heartbeat": "2026-01-01T00:00:00.000000"}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("baseline-store-merge", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := e.st.MergeDriverInternalInfo(ctx, n.UUID, map[string]any{"agent_last_heartbeat": "2026-01-01T00:00:00.000000"}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
