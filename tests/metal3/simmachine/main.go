// Command simmachine stands in for a fake-hardware machine's boots while
// the Metal3 tests run (tests/metal3): whenever the node waits for its
// agent (inspect wait, clean wait, wait call-back, rescue wait, service
// wait) and no simulated agent runs, it boots one, ironflow's real agent
// code on simulated disks (agent/sim), as tests/'s simMachine does, and
// prints what each agent wrote to its disk once it stops. It reads
// the node with the credentials in SIMMACHINE_API_USER and
// SIMMACHINE_API_PASSWORD when the API wants them (http_basic). It is
// a module and a process of its own so that the Metal3 client's module
// requires gophercloud at BMO's version, not ironflow's. It prints one
// line per boot and stops on SIGTERM. SIMMACHINE_CUSTOM_STEP gives its
// agents a custom deploy step of that name.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/ironflow/ironflow/agent"
	"github.com/ironflow/ironflow/agent/sim"
)

func main() {
	api := flag.String("api", "", "ironflow API URL")
	node := flag.String("node", "", "node UUID")
	macs := flag.String("macs", "", "the machine's MAC addresses, comma-separated")
	flag.Parse()
	if *api == "" || *node == "" || *macs == "" {
		fmt.Fprintln(os.Stderr, "usage: simmachine -api URL -node UUID -macs MAC[,MAC]")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	cfg := sim.Config{APIURL: *api, MACs: strings.Split(*macs, ","), Insecure: true, HeartbeatInterval: time.Second, DiskSize: 40 << 30}
	// SIMMACHINE_CUSTOM_STEP names a custom deploy step the agent offers
	// (agent.Config CustomDeploySteps), as an image for Metal3's
	// customDeploy would; it prints a line each time it runs.
	if name := os.Getenv("SIMMACHINE_CUSTOM_STEP"); name != "" {
		cfg.CustomDeploySteps = []agent.CustomStep{{Name: name, Run: func(_ context.Context, args, _ map[string]any) (any, error) {
			b, _ := json.Marshal(args)
			fmt.Printf("custom deploy step %s ran with args %s\n", name, b)
			return "done", nil
		}}}
	}
	var agent *sim.Agent
	boots := 0
	for {
		select {
		case <-ctx.Done():
			if agent != nil && agent.PoweredOn() {
				agent.Stop()
			}
			return
		case <-time.After(100 * time.Millisecond):
		}
		if agent != nil && !agent.PoweredOn() {
			// The agent's machine powered off or rebooted: what it wrote.
			d := agent.Hardware().Disks()[0]
			fmt.Printf("agent %d stopped: config drive writes %d, bytes written %d\n", boots, d.ConfigDriveWrites(), d.BytesWritten())
			agent = nil
		}
		switch provisionState(*api, *node) {
		case "inspect wait", "clean wait", "wait call-back", "rescue wait", "service wait":
		default:
			continue
		}
		if agent != nil && agent.PoweredOn() {
			continue
		}
		a, err := sim.Start(ctx, cfg)
		if err != nil {
			fmt.Fprintf(os.Stderr, "boot simulated agent: %v\n", err)
			os.Exit(1)
		}
		agent = a
		boots++
		fmt.Println("booted a simulated agent")
	}
}

// provisionState reads the node's provision state ("" on any error).
func provisionState(api, id string) string {
	var n struct {
		ProvisionState string `json:"provision_state"`
	}
	req, _ := http.NewRequest("GET", api+"/v1/nodes/"+id, nil)
	req.Header.Set("X-OpenStack-Ironic-API-Version", "1.81")
	if user := os.Getenv("SIMMACHINE_API_USER"); user != "" {
		req.SetBasicAuth(user, os.Getenv("SIMMACHINE_API_PASSWORD"))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&n) != nil {
		return ""
	}
	return n.ProvisionState
}
