package console

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/vbmc"
)

// TestGraphicalConsoleFromTheBMC: a redfish-graphical node without
// driver_info console_vnc_address gets the VNC address from its BMC's
// Redfish Manager (ironflow vbmc's Oem.Ironflow.VNCAddress): the
// endpoint relays a powered-on vbmc VM's own VNC server (QEMU's RFB
// greeting). With the VM off nothing listens there and the session ends
// at once; a node with neither key is refused.
func TestGraphicalConsoleFromTheBMC(t *testing.T) {
	if _, err := exec.LookPath(vbmc.DefaultQEMUBinary); err != nil {
		t.Skipf("SKIP: %s is not installed (Debian package qemu-system-x86): %v", vbmc.DefaultQEMUBinary, err)
	}
	// Short: QMP socket paths are limited to 108 bytes.
	dir, err := os.MkdirTemp("", "cb")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	vncPort := 0
	for p := 6100 + os.Getpid()%2000; p < 8300; p++ {
		if ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p)); err == nil {
			ln.Close()
			vncPort = p
			break
		}
	}
	raw, _ := json.Marshal(map[string]any{
		"state_dir": filepath.Join(dir, "state"), "password": "password",
		"vms": []any{map[string]any{"name": "vm0", "mac": "52:54:00:00:00:43", "memory_mb": 64, "netdev": "none",
			"vnc_address": fmt.Sprintf("127.0.0.1:%d", vncPort)}},
	})
	cfgPath := filepath.Join(dir, "vbmc.json")
	if err := os.WriteFile(cfgPath, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := vbmc.LoadConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := vbmc.NewServer(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer srv.Close()
	defer ts.Close()
	reset := func(kind string) {
		req, _ := http.NewRequest("POST", ts.URL+"/redfish/v1/Systems/vm0/Actions/ComputerSystem.Reset", strings.NewReader(`{"ResetType":"`+kind+`"}`))
		req.SetBasicAuth("admin", "password")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			t.Fatalf("reset %s: %d", kind, resp.StatusCode)
		}
	}
	info := map[string]any{"redfish_address": ts.URL, "redfish_system_id": "/redfish/v1/Systems/vm0",
		"redfish_username": "admin", "redfish_password": "password"}
	spec, err := SpecFor("redfish-graphical", "n1", info)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := spec.Graphical.(BMCVNCSource); !ok {
		t.Fatalf("without console_vnc_address the source is %T, want the BMC's", spec.Graphical)
	}
	m := &Manager{}
	defer m.StopAll()
	eps, err := m.Start(spec)
	if err != nil || eps.Graphical == "" {
		t.Fatalf("Start = %+v, %v", eps, err)
	}

	// Off: QEMU's VNC server does not run, the session closes without a byte.
	off := dial(t, eps.Graphical)
	if got, err := io.ReadAll(off); err != nil || len(got) != 0 {
		t.Errorf("with the VM off the session read %q, %v; want EOF", got, err)
	}

	reset("On")
	defer reset("ForceOff")
	c := dial(t, eps.Graphical)
	buf := make([]byte, 12)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "RFB 003.008\n" {
		t.Fatalf("through the relay to the address the BMC announced: %q, %v", buf, err)
	}

	if _, err := SpecFor("redfish-graphical", "n1", map[string]any{}); err == nil || !strings.Contains(err.Error(), "console_vnc_address") {
		t.Errorf("a node with neither console_vnc_address nor redfish_address: %v", err)
	}
}
