package sim

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"
)

// TestScale500 starts 500 simulated agents in one process, as the control
// plane's benchmarks do, and waits for each to look up and heartbeat.
func TestScale500(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIP: -short")
	}
	api := newFakeAPI(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var sims []*Agent
	start := time.Now()
	for i := range 500 {
		s, err := Start(ctx, Config{APIURL: api.URL, MACs: []string{fmt.Sprintf("52:54:01:00:%02x:%02x", i>>8, i&0xff)}, HeartbeatInterval: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		sims = append(sims, s)
	}
	for _, s := range sims {
		<-s.LookedUp()
		waitFor(t, "a heartbeat", func() bool { return api.count(s.NodeUUID()) >= 1 })
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("500 simulated agents up and heartbeating in %s; heap %d MiB, goroutines %d", time.Since(start).Round(time.Millisecond), ms.HeapInuse>>20, runtime.NumGoroutine())
	for _, s := range sims {
		s.Stop()
	}
}
