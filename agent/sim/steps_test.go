package sim

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/ironflow/ironflow/agent/client"
)

// TestSimulatedCleanAndServiceSteps: the simulated agent advertises the
// agent's clean and service steps and runs them on its simulated disks,
// lightly enough for many simulated machines at once.
func TestSimulatedCleanAndServiceSteps(t *testing.T) {
	api := newFakeAPI(t)
	ctx := context.Background()
	s, err := Start(ctx, Config{APIURL: api.URL, MACs: []string{"52:54:00:aa:00:09"}, HeartbeatInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	c, err := s.Client()
	if err != nil {
		t.Fatal(err)
	}
	cs, err := c.GetCleanSteps(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	offered := map[string]int{}
	for _, st := range cs.Steps {
		offered[st.Step] = st.Priority
	}
	for _, name := range []string{"erase_devices_express", "erase_pstore", "clean_uefi_nvram", "burnin_cpu", "burnin_memory", "burnin_disk", "burnin_network"} {
		if p, ok := offered[name]; !ok || p != 0 {
			t.Errorf("%s: offered %v priority %d", name, ok, p)
		}
	}
	ss, err := c.GetServiceSteps(ctx, nil, nil)
	if err != nil || len(ss.Steps) == 0 {
		t.Fatalf("service steps %+v %v", ss, err)
	}
	run := func(step string, args map[string]any) map[string]any {
		t.Helper()
		r, err := c.ExecuteCleanStep(ctx, client.Step{Step: step, Interface: "deploy", Args: args}, nil, nil)
		if err == nil {
			r, err = c.WaitCommand(ctx, r.ID, 20*time.Millisecond, nil)
		}
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		var body struct {
			Result map[string]any `json:"clean_result"`
		}
		json.Unmarshal(r.CommandResult, &body)
		return body.Result
	}
	start := time.Now()
	if res := run("burnin_cpu", map[string]any{"timeout": 1}); res["errors"] != float64(0) || res["cpus"] != float64(1) {
		t.Fatalf("burnin_cpu %v", res)
	}
	if res := run("burnin_memory", map[string]any{"timeout": 1}); res["errors"] != float64(0) {
		t.Fatalf("burnin_memory %v", res)
	}
	res := run("burnin_disk", map[string]any{"loops": 1})
	if d, _ := res["disks"].(map[string]any)["/dev/vda"].(map[string]any); d["errors"] != float64(0) || d["passes"] != float64(1) {
		t.Fatalf("burnin_disk %v", res)
	}
	if res := run("erase_devices_express", nil); res["erased"].(map[string]any)["/dev/vda"] != "metadata" {
		t.Fatalf("erase_devices_express %v", res)
	}
	if res := run("clean_uefi_nvram", nil); res["message"] == nil {
		t.Fatalf("clean_uefi_nvram on a BIOS machine %v", res)
	}
	run("erase_pstore", nil)
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("simulated steps took %s", d)
	}
}
