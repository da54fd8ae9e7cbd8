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
