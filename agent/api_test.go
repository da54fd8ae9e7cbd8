package agent

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/agent/client"
)

func TestLookupAndHeartbeat(t *testing.T) {
	api := newFakeAPI(t)
	a, _ := startAgent(t, api, newFileHardware(t, 8<<20), nil)
	hb := api.waitHeartbeat(t)
	if hb["callback_url"] != a.CallbackURL() || !strings.HasPrefix(a.CallbackURL(), "https://127.0.0.1:") {
		t.Fatalf("callback_url %v, agent %s", hb["callback_url"], a.CallbackURL())
	}
	if hb["agent_token"] != testToken || hb["agent_version"] != Version {
		t.Fatalf("heartbeat body %v", hb)
	}
	if ca, _ := hb["agent_verify_ca"].(string); !strings.Contains(ca, "BEGIN CERTIFICATE") {
		t.Fatalf("agent_verify_ca missing: %v", hb)
	}
	if a.NodeUUID() != api.node {
		t.Fatalf("node %s", a.NodeUUID())
	}
}

// A command's end triggers a heartbeat right away (the interval is an hour).
func TestHeartbeatAfterCommand(t *testing.T) {
	api := newFakeAPI(t)
	_, c := startAgent(t, api, newFileHardware(t, 8<<20), nil)
	api.waitHeartbeat(t)
	r, err := c.ExecuteCleanStep(context.Background(), client.Step{Step: "erase_devices_metadata", Interface: "deploy"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	api.waitHeartbeat(t)
	r, err = c.WaitCommand(context.Background(), r.ID, 10*time.Millisecond, nil)
	if err != nil || r.CommandStatus != client.StatusSucceeded {
		t.Fatalf("%+v %v", r, err)
	}
}

func TestCommandAPIRequiresToken(t *testing.T) {
	api := newFakeAPI(t)
	a, _ := startAgent(t, api, newFileHardware(t, 8<<20), func(c *Config) { c.Insecure = true })
	for _, tc := range []struct{ method, path string }{
		{"GET", "/v1/commands/"}, {"GET", "/v1/commands"}, {"GET", "/v1/status"}, {"GET", "/v1/commands/x"},
		{"POST", "/v1/commands/?wait=true"},
	} {
		for _, tok := range []string{"", "&agent_token=wrong", "&agent_token=" + testToken[:len(testToken)-1]} {
			sep := "?"
			if strings.Contains(tc.path, "?") {
				sep = ""
			}
			req, _ := http.NewRequest(tc.method, a.CallbackURL()+tc.path+sep+strings.TrimPrefix(tok, "&"), strings.NewReader(`{"name":"standby.sync","params":{}}`))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var body map[string]any
			json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			if resp.StatusCode != 401 || body["type"] != "Unauthorized" {
				t.Errorf("%s %s token %q: HTTP %d %v", tc.method, tc.path, tok, resp.StatusCode, body)
			}
		}
	}
	// With the right token: accepted.
	c, _ := client.New(a.CallbackURL(), a.Token())
	if _, err := c.Status(context.Background()); err != nil {
		t.Fatal(err)
	}
	bad, _ := client.New(a.CallbackURL(), "wrong")
	if _, err := bad.ListCommands(context.Background()); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("want ErrUnauthorized, got %v", err)
	}
	if strings.Contains(errString(bad.Sync(context.Background())), "wrong") {
		t.Fatal("token leaked into an error")
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// blockingHardware blocks SyncAll until released, to hold a command running.
type blockingHardware struct {
	*fileHardware
	release chan struct{}
}

func (b *blockingHardware) Power(ctx context.Context, _ PowerAction) error { return nil }

func TestCommandAPIBusyAndShapes(t *testing.T) {
	api := newFakeAPI(t)
	hold := make(chan struct{})
	a, c := startAgent(t, api, newFileHardware(t, 8<<20), func(cfg *Config) {
		cfg.BeforeCommand = func(ctx context.Context, name string) error {
			if name == "clean.execute_clean_step" {
				<-hold
			}
			return nil
		}
	})
	ctx := context.Background()
	first, err := c.ExecuteCleanStep(ctx, client.Step{Step: "erase_devices_metadata"}, map[string]any{"uuid": "x"}, nil)
	if err != nil || first.CommandStatus != client.StatusRunning || first.ID == "" || first.CommandName != "clean.execute_clean_step" {
		t.Fatalf("first: %+v %v", first, err)
	}
	_, err = c.GetCleanSteps(ctx, nil, nil)
	if !errors.Is(err, client.ErrAgentBusy) || !strings.Contains(err.Error(), "executing command clean.execute_clean_step") {
		t.Fatalf("want busy, got %v", err)
	}
	close(hold)
	done, err := c.WaitCommand(ctx, first.ID, 10*time.Millisecond, nil)
	if err != nil || done.CommandStatus != client.StatusSucceeded {
		t.Fatalf("%+v %v", done, err)
	}
	var res map[string]any
	json.Unmarshal(done.CommandResult, &res)
	if step, _ := res["clean_step"].(map[string]any); step["step"] != "erase_devices_metadata" {
		t.Fatalf("clean result %s", done.CommandResult)
	}
	steps, err := c.GetDeploySteps(ctx, nil, nil)
	if err != nil || len(steps.Steps) == 0 || steps.Steps[0].Step != "write_image" || steps.Steps[0].Priority != 80 || steps.HardwareManagerVersion[hardwareManagerKey] == nil {
		t.Fatalf("deploy steps %+v %v", steps, err)
	}
	cs, err := c.GetCleanSteps(ctx, nil, nil)
	if err != nil || len(cs.Steps) != len(cleanSteps()) || cs.Steps[0].Step != "erase_devices_metadata" || cs.Steps[0].Priority != 99 {
		t.Fatalf("clean steps %+v %v", cs, err)
	}
	list, err := c.ListCommands(ctx)
	if err != nil || len(list) != 3 || list[0].ID != first.ID {
		t.Fatalf("list %d %v", len(list), err)
	}
	// Raw IPA shape of a command.
	resp, err := http.Get(a.CallbackURL() + "/v1/commands/" + first.ID + "?agent_token=" + a.Token())
	if err == nil {
		resp.Body.Close() // TLS with an unknown CA: a plain client must fail
		t.Fatal("plain client trusted the self-signed certificate")
	}
	// Unknown extension / command / bad name.
	for _, tc := range []struct {
		name string
		code string
	}{{"nope.x", "HTTP 404"}, {"deploy.nope", "HTTP 400"}, {"bogus", "HTTP 400"}} {
		if _, err := c.Execute(ctx, tc.name, nil, true); err == nil || !strings.Contains(err.Error(), tc.code) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	if _, err := c.Command(ctx, "missing"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("missing command: %v", err)
	}
	// A failing step: FAILED with IPA's error object.
	r, err := c.ExecuteDeployStep(ctx, client.Step{Step: "write_image", Args: map[string]any{"image_source": "ftp://x"}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err = c.WaitCommand(ctx, r.ID, 10*time.Millisecond, nil)
	var cf *client.CommandFailedError
	if !errors.As(err, &cf) || cf.Type != "DeploymentError" || !strings.Contains(cf.Details, "is not http(s)") || r.CommandStatus != client.StatusFailed {
		t.Fatalf("want DeploymentError, got %v (%+v)", err, r)
	}
}

func TestStandbyPowerOff(t *testing.T) {
	api := newFakeAPI(t)
	hw := newFileHardware(t, 8<<20)
	_, c := startAgent(t, api, hw, nil)
	if err := c.PowerOff(context.Background()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		hw.mu.Lock()
		n := len(hw.power)
		hw.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("power off never reached the hardware")
		}
		time.Sleep(20 * time.Millisecond)
	}
	logs, err := c.CollectSystemLogs(context.Background())
	if err != nil || logs == "" {
		t.Fatalf("logs: %v", err)
	}
	_ = io.Discard
}

// The agent keeps retrying lookup and heartbeats through an API outage.
func TestSurvivesAPIOutage(t *testing.T) {
	api := newFakeAPI(t)
	api.down.Store(true)
	a, err := New(Config{APIURL: api.URL, LookupAddresses: []string{"52:54:00:12:34:56"}, ListenAddr: "127.0.0.1:0",
		HeartbeatInterval: 20 * time.Millisecond, Hardware: newFileHardware(t, 8<<20), Logger: testLogger(t), LookupBackoffMax: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); <-a.Done() }()
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		api.mu.Lock()
		n := api.lookups
		api.mu.Unlock()
		if n >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("lookup was not retried")
		}
		time.Sleep(5 * time.Millisecond)
	}
	api.down.Store(false)
	<-a.LookedUp()
	api.waitHeartbeat(t)
	api.down.Store(true)
	for api.hbFailures.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatal("heartbeats stopped during the outage")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for len(api.hbCh) > 0 {
		<-api.hbCh
	}
	api.down.Store(false)
	api.waitHeartbeat(t)
}
