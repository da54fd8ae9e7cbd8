package vbmc

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// TestConsoleArgs: vnc_address adds a VGA adapter and QEMU's VNC server at
// the display of that port, serial_address turns the serial chardev into a
// TCP server that still writes the console log; without them the command
// line is the one of a VM without consoles (no display, serial to the log).
func TestConsoleArgs(t *testing.T) {
	cfg := Config{StateDir: "/tmp/x", Password: "p", VMs: []VM{
		{Name: "plain", MAC: "52:54:00:00:00:10"},
		{Name: "consoles", MAC: "52:54:00:00:00:11", VNCAddress: "127.0.0.1:5907", SerialAddress: "127.0.0.1:7001"},
	}}
	if err := cfg.normalize(); err != nil {
		t.Fatal(err)
	}
	plain := newMachine(&cfg, cfg.VMs[0], slog.Default()).qemuArgs(nil, "")
	if slices.Contains(plain, "-vnc") || slices.Contains(plain, "VGA,id=vga0") {
		t.Errorf("a VM without vnc_address has a display: %v", plain)
	}
	if !slices.Contains(plain, "file,id=s0,path=/tmp/x/plain/console.log,append=on") {
		t.Errorf("a VM without serial_address: serial chardev not the log file: %v", plain)
	}
	args := strings.Join(newMachine(&cfg, cfg.VMs[1], slog.Default()).qemuArgs(nil, ""), " ")
	for _, want := range []string{
		"-device VGA,id=vga0 -vnc 127.0.0.1:7",
		"-chardev socket,id=s0,host=127.0.0.1,port=7001,server=on,wait=off,nodelay=on,logfile=/tmp/x/consoles/console.log,logappend=on",
		"-serial chardev:s0",
		"-display none",
	} {
		if !strings.Contains(args, want) {
			t.Errorf("args lack %q:\n%s", want, args)
		}
	}
}

// TestManagerAnnouncesConsoles: the Manager says which consoles the BMC
// serves and, in Oem.Ironflow, where.
func TestManagerAnnouncesConsoles(t *testing.T) {
	cfg := newTestConfigWith(t, func(_, vm map[string]any) {
		vm["vnc_address"] = "127.0.0.1:5999"
		vm["serial_address"] = "127.0.0.1:7999"
	})
	cfg.VMs = append(cfg.VMs, VM{Name: "vm1", MAC: "52:54:00:00:00:11"})
	if err := cfg.normalize(); err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	type console struct {
		ServiceEnabled        bool
		MaxConcurrentSessions int
		ConnectTypesSupported []string
	}
	type manager struct {
		GraphicalConsole, SerialConsole console
		Oem                             struct {
			Ironflow struct{ VNCAddress, SerialAddress string }
		}
	}
	var mgr manager
	get := func(name string) {
		req, _ := http.NewRequest("GET", ts.URL+"/redfish/v1/Managers/"+name, nil)
		req.SetBasicAuth("admin", "password")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		mgr = manager{}
		if err := json.NewDecoder(resp.Body).Decode(&mgr); err != nil || resp.StatusCode != 200 {
			t.Fatalf("manager %s: %d %v", name, resp.StatusCode, err)
		}
	}
	get("vm0")
	if g := mgr.GraphicalConsole; !g.ServiceEnabled || !slices.Equal(g.ConnectTypesSupported, []string{"KVMIP"}) {
		t.Errorf("vm0 GraphicalConsole %+v", g)
	}
	if s := mgr.SerialConsole; !s.ServiceEnabled || s.MaxConcurrentSessions != 1 {
		t.Errorf("vm0 SerialConsole %+v", s)
	}
	if o := mgr.Oem.Ironflow; o.VNCAddress != "127.0.0.1:5999" || o.SerialAddress != "127.0.0.1:7999" {
		t.Errorf("vm0 Oem.Ironflow %+v", o)
	}
	get("vm1")
	if mgr.GraphicalConsole.ServiceEnabled || mgr.SerialConsole.ServiceEnabled || mgr.Oem.Ironflow.VNCAddress != "" {
		t.Errorf("vm1 without consoles announces %+v", mgr)
	}
}
