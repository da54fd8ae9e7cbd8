package activities_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/internal/testkit/storetest"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/vbmc"
	"github.com/ironflow/ironflow/workflows"
)

// isoRecorder is the virtual-media ISO service, recording what each ISO
// was asked to hold.
type isoRecorder struct {
	url  string
	reqs []activities.AgentISO
}

func (r *isoRecorder) BuildAgentISO(_ context.Context, req activities.AgentISO) (string, error) {
	r.reqs = append(r.reqs, req)
	return r.url, nil
}

func (r *isoRecorder) RemoveAgentISO(string) error { return nil }

// TestAgentISOsCarryNetworkData: every agent ISO of a virtual-media node
// (deploy, clean and inspect boot the agent; rescue boots it too) is
// asked to hold the node's network_data, as JSON that decodes to what
// the node has; a node without network_data gets ISOs without it. Each
// ISO's command line names the boot NIC (BOOTIF), and an inspection
// boot's asks for LLDP. The
// ISO is inserted through ironflow's virtual BMC over Redfish.
func TestAgentISOsCarryNetworkData(t *testing.T) {
	iso := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("an ISO image, as far as a virtual CD cares"))
	}))
	t.Cleanup(iso.Close)
	bmcURL := virtualMediaBMC(t, "52:54:00:dd:02:01")

	st := storetest.New(t)
	ctx := context.Background()
	rec := &isoRecorder{url: iso.URL + "/agent.iso"}
	a := activities.New(st, activities.Config{Conductor: "c1", APIURL: "http://127.0.0.1:6385", VirtualMedia: rec,
		InspectionKernelParams: activities.DefaultInspectionKernelParams},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	nd := map[string]any{
		"links":    []any{map[string]any{"id": "nic0", "type": "phy", "ethernet_mac_address": "52:54:00:dd:02:01"}},
		"networks": []any{map[string]any{"id": "v6", "type": "ipv6", "link": "nic0", "network_id": "p", "ip_address": "fd00::5/64"}},
		"services": []any{},
	}
	withND := &store.Node{Driver: "redfish", BootInterface: "redfish-virtual-media", ProvisionState: provision.Manageable, NetworkData: nd,
		DriverInfo: map[string]any{"redfish_address": bmcURL, "redfish_system_id": "/redfish/v1/Systems/vm0",
			"redfish_username": "admin", "redfish_password": "password"}}
	without := *withND
	without.NetworkData = map[string]any{}
	for _, n := range []*store.Node{withND, &without} {
		if err := st.CreateNode(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	for _, kind := range []workflows.BootKind{workflows.BootAgent, workflows.BootInspect, workflows.BootRescue} {
		for _, n := range []*store.Node{withND, &without} {
			rec.reqs = nil
			node := workflows.NodeInfo{UUID: n.UUID, Driver: "redfish", BootInterface: "redfish-virtual-media", BootMode: "uefi",
				MACs: []string{"52:54:00:DD:02:01"}}
			if err := a.PrepareBoot(ctx, workflows.BootInput{Node: node, Kind: kind}); err != nil {
				t.Fatalf("PrepareBoot %s: %v", kind, err)
			}
			if len(rec.reqs) != 1 {
				t.Fatalf("PrepareBoot %s built %d ISOs, want 1", kind, len(rec.reqs))
			}
			// The ISO names the boot NIC as a network boot does, and an
			// inspection boot collects LLDP.
			params := rec.reqs[0].KernelParams
			if !strings.Contains(params, "BOOTIF=01-52-54-00-dd-02-01") {
				t.Errorf("%s: the ISO's kernel params %q do not name the boot NIC", kind, params)
			}
			if got := strings.Contains(params, "ipa-collect-lldp=1"); got != (kind == workflows.BootInspect) {
				t.Errorf("%s: the ISO's kernel params %q: ipa-collect-lldp=1 %v", kind, params, got)
			}
			got := rec.reqs[0].NetworkData
			if n == &without {
				if got != nil {
					t.Errorf("%s: the ISO of a node without network_data holds %s", kind, got)
				}
				continue
			}
			var decoded any
			if err := json.Unmarshal(got, &decoded); err != nil || !reflect.DeepEqual(decoded, jsonValue(t, nd)) {
				t.Errorf("%s: the ISO holds network_data %s (%v), want %v", kind, got, err, nd)
			}
		}
	}
}

func jsonValue(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// virtualMediaBMC serves one VM's Redfish BMC (ironflow's virtual BMC,
// admin/password) that takes media from loopback URLs, for the
// virtual-media activities; it returns the BMC's URL. No VM runs: the
// BMC records the media for the machine's next start.
func virtualMediaBMC(t *testing.T, mac string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := vbmc.Config{StateDir: filepath.Join(dir, "state"), Username: "admin", Password: "password",
		MediaNetworks: []string{"127.0.0.0/8"},
		VMs:           []vbmc.VM{{Name: "vm0", MAC: mac, Disk: filepath.Join(dir, "vm0.raw"), DiskSize: "1M", Netdev: "none"}}}
	srv, err := vbmc.NewServer(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close() })
	return hs.URL
}
