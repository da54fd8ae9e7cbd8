package tests

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/embedded"
	"github.com/ironflow/ironflow/internal/testkit/promcheck"
	"github.com/ironflow/ironflow/vbmc"
)

// recordedRedfish serves a recorded Redfish service of bmc/testdata
// (<dir>/<path>/index.json is /redfish/v1/<path>), read-only, as the
// vendor's BMC answered when it was recorded.
func recordedRedfish(t *testing.T, dir string) string {
	t.Helper()
	root := filepath.Join("..", "bmc", "testdata", "redfish", dir)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := strings.Trim(strings.TrimPrefix(r.URL.Path, "/redfish/v1"), "/")
		if r.Method != http.MethodGet || strings.Contains(p, "..") {
			http.Error(w, `{"error": {"message": "read-only recording"}}`, http.StatusMethodNotAllowed)
			return
		}
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(p), "index.json"))
		if err != nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// sensorsVBMC serves `ironflow vbmc`'s Redfish service for one VM that is
// never started (its sensors read as a machine that is off), and its IPMI
// BMC (ipmi_sim with the vbmc's sensors) on ipmiAddr.
func sensorsVBMC(t *testing.T, ipmiAddr string) string {
	t.Helper()
	dir := t.TempDir()
	disk := filepath.Join(dir, "sens0.raw")
	if err := os.WriteFile(disk, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(disk, 16<<20); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "vms.json")
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf(`{"state_dir": %q, "username": "admin", "password": "password",
		"vms": [{"name": "sens0", "mac": "52:54:00:5e:00:01", "disk": %q, "memory_mb": 256, "cpus": 1, "firmware": "bios", "netdev": "none"}]}`,
		filepath.Join(dir, "state"), disk)), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := vbmc.LoadConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := vbmc.NewServer(cfg, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { ts.Close(); srv.Close() })
	stop, err := vbmc.StartIPMISim(context.Background(), cfg, "sens0", ipmiAddr, "admin", "password",
		[]string{lab.Bin, "vbmc", "chassis-control", "--config", cfgPath, "--vm", "sens0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	return ts.URL
}

// TestPrometheusScrapesHardwareSensors runs a worker of its own conductor
// group with --sensors-interval, whose nodes are behind `ironflow vbmc`
// (Redfish, and IPMI through ipmi_sim's SDRs) and DMTF's recorded rackmount
// service, and a real Prometheus scraping its
// /metrics/sensors: the sensors appear under ironic-prometheus-exporter's
// names with the values the BMCs report, a health set on the vbmc shows as
// a failing fan, and the fleet's /metrics carries no sensor series.
func TestPrometheusScrapesHardwareSensors(t *testing.T) {
	prom := requirePrometheus(t)
	start := time.Now()
	const group = "sensors"
	ipmiPort, err := embedded.FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	vb, dmtf := sensorsVBMC(t, fmt.Sprintf("127.0.0.1:%d", ipmiPort)), recordedRedfish(t, "dmtf-public-rackmount1")

	port, err := embedded.FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", port)
	w, err := lab.Spawn("ironflow-worker-sensors", append(lab.WorkerArgs(), "--conductor-groups", group,
		"--conductor-hostname", "sensors-worker", "--metrics-listen", metricsAddr, "--sensors-interval", "1s"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop(5 * time.Second) })
	if err := lab.WaitHTTP(context.Background(), "http://"+metricsAddr+"/metrics/sensors", w); err != nil {
		t.Fatal(err)
	}
	for name, info := range map[string]map[string]any{
		"sensors-vbmc": {"redfish_address": vb, "redfish_system_id": "/redfish/v1/Systems/sens0", "redfish_username": "admin", "redfish_password": "password"},
		"sensors-ipmi": {"ipmi_address": "127.0.0.1", "ipmi_port": ipmiPort, "ipmi_username": "admin", "ipmi_password": "password"},
		"sensors-dmtf": {"redfish_address": dmtf, "redfish_system_id": "/redfish/v1/Systems/437XR1138R2", "redfish_username": "admin",
			"redfish_password": "password", "redfish_auth_type": "basic"},
	} {
		var n node
		var code int
		waitFor(t, "node "+name+" created in group "+group, 30*time.Second, func() bool {
			driver := "redfish"
			if _, ok := info["ipmi_address"]; ok {
				driver = "ipmi"
			}
			code, _ = call(t, "POST", "/v1/nodes", map[string]any{"name": name, "driver": driver, "conductor_group": group, "driver_info": info}, &n)
			return code == 201
		})
		t.Cleanup(func() { call(t, "DELETE", "/v1/nodes/"+n.UUID, nil, nil) })
	}

	base := startPrometheus(t, prom, map[string]string{"ironflow-sensors": metricsAddr + "/metrics/sensors"})
	for q, want := range map[string]float64{
		// DMTF's recording: CPU1 at 41 °C, its fans at 2100 and 2050 RPM,
		// its power supply in Warning, 344 W.
		`baremetal_temp_cpu_celsius{node_name="sensors-dmtf",sensor_id="0@1U"}`: 41,
		`sum(baremetal_fan_speed_rpm{node_name="sensors-dmtf"})`:                4150,
		`baremetal_power_status{node_name="sensors-dmtf",entity_id="PSU"}`:      1,
		`baremetal_power_consumed_watts{node_name="sensors-dmtf"}`:              344,
		// The vbmc's VM is off: room temperature, fans still, standby power.
		`baremetal_temp_cpu_celsius{node_name="sensors-vbmc",sensor_id="0@sens0"}`: 21,
		`sum(baremetal_fan_speed_rpm{node_name="sensors-vbmc"})`:                   0,
		`baremetal_fan_status{node_name="sensors-vbmc",sensor_id="0@sens0"}`:       0,
		`baremetal_power_consumed_watts{node_name="sensors-vbmc"}`:                 9,
		// ipmi_sim's SDRs: CPU at 40 °C, fans at 5600 and 5500 RPM.
		`baremetal_temp_cpu_celsius{node_name="sensors-ipmi",sensor_id="CPU Temp"}`: 40,
		`sum(baremetal_fan_speed_rpm{node_name="sensors-ipmi"})`:                    11100,
		`sum(baremetal_fan_status{node_name="sensors-ipmi"})`:                       0,
		// One drive, the VM's disk, healthy.
		`count(baremetal_drive_status{node_name="sensors-vbmc"} == 0)`: 1,
	} {
		waitQuery(t, base, q, want, 30*time.Second)
	}
	if err := vbmc.SetHealth(context.Background(), vb, "admin", "password", "sens0", "Critical"); err != nil {
		t.Fatal(err)
	}
	waitQuery(t, base, `baremetal_fan_status{node_name="sensors-vbmc",sensor_id="0@sens0"}`, 1, 30*time.Second)

	// The fleet's endpoint stays bounded: no sensor series there, and the
	// poller's reads are counted.
	fleet := scrapeAndLint(t, "ironflow worker (sensors)", metricsAddr)
	if strings.Contains(fleet, "baremetal_") {
		t.Errorf("the worker's /metrics carries sensor series")
	}
	if !strings.Contains(fleet, `ironflow_sensor_reads_total{outcome="ok"}`) {
		t.Errorf("the worker's /metrics counts no sensor reads")
	}
	body, err := promcheck.Scrape("http://" + metricsAddr + "/metrics/sensors")
	if err != nil {
		t.Fatal(err)
	}
	if err := promcheck.Lint(body); err != nil {
		t.Errorf("/metrics/sensors: %v", err)
	}
	t.Logf("test took %s", time.Since(start).Round(time.Millisecond))
}
