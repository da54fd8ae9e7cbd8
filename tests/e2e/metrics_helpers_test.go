package e2e

import (
	"errors"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/internal/testkit/promcheck"
)

// devMetricsURL is where `ironflow dev` serves its metrics in a lab: its
// default --metrics-listen, on the lab's own loopback.
const devMetricsURL = "http://127.0.0.1:9608/metrics"

// scrapeDevMetrics reads the lab's `ironflow dev` metrics as Prometheus
// does and checks them with `promtool check metrics`.
func scrapeDevMetrics(t *testing.T, lab *Lab) promcheck.Families {
	t.Helper()
	code, body := labGet(t, lab, devMetricsURL)
	if code != 200 {
		t.Fatalf("GET %s: %d", devMetricsURL, code)
	}
	switch err := promcheck.Lint(body); {
	case errors.Is(err, promcheck.ErrNoPromtool):
		t.Logf("LOUD: %v: ironflow dev's scrape is not linted", err)
	case err != nil:
		t.Errorf("ironflow dev's scrape: %v", err)
	}
	fams, err := promcheck.Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// checkDeployMetrics checks what one network-booted deploy through IPMI
// leaves in `ironflow dev`'s metrics: DHCP replies, the per-node iPXE
// script and the agent's files over HTTP (QEMU's NIC ROM is iPXE: no
// TFTP; pxe/tftp_test.go counts TFTP transfers), IPMI calls, the
// deploy and its write_image step, the active node (docs/metrics.md).
func checkDeployMetrics(t *testing.T, lab *Lab, s *stack) {
	t.Helper()
	// make run's banner names the address.
	if len(s.procs) > 0 && !strings.Contains(s.procs[0].Tail(1<<20), "Metrics      "+devMetricsURL+" ") {
		t.Errorf("ironflow dev's banner does not name %s:\n%s", devMetricsURL, s.procs[0].Tail(3000))
	}
	v := scrapeDevMetrics(t, lab).Sum
	for _, c := range []struct {
		what string
		got  float64
		min  float64
	}{
		{"DHCP offers", v("ironflow_dhcp_replies_total", "type=offer"), 1},
		{"DHCP acks", v("ironflow_dhcp_replies_total", "type=ack"), 1},
		{"iPXE scripts", v("ironflow_boot_http_requests_total", "kind=ipxe", "code=200"), 1},
		{"agent kernel and initramfs", v("ironflow_boot_http_requests_total", "kind=images", "code=200"), 2},
		{"IPMI calls", v("ironflow_bmc_calls_total", "driver=ipmi", "outcome=ok"), 1},
		{"deploys", v("ironflow_operations_finished_total", "operation=deploy", "outcome=succeeded"), 1},
		{"write_image steps", v("ironflow_step_duration_seconds", "operation=deploy", "step=deploy.write_image", "outcome=ok"), 1},
		{"active nodes", v("ironflow_nodes", "provision_state=active"), 1},
		{"API requests", v("ironflow_api_requests_total"), 1},
		{"Temporal workflow completions", v("temporal_workflow_completed_total"), 1},
	} {
		if c.got < c.min {
			t.Errorf("ironflow dev's metrics: %s = %v, want at least %v", c.what, c.got, c.min)
		}
	}
	t.Logf("ironflow dev's metrics after the deploy: %v DHCP offers, %v acks, %v iPXE scripts, %v agent files, %v IPMI calls",
		v("ironflow_dhcp_replies_total", "type=offer"), v("ironflow_dhcp_replies_total", "type=ack"),
		v("ironflow_boot_http_requests_total", "kind=ipxe"), v("ironflow_boot_http_requests_total", "kind=images"),
		v("ironflow_bmc_calls_total", "driver=ipmi"))
	if d := v("ironflow_operations_finished_total", "operation=deploy", "outcome=succeeded"); d != 1 {
		t.Errorf("ironflow dev's metrics: %v deploys finished, want the 1 this test made", d)
	}
}
