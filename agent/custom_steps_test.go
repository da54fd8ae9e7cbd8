package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/agent/client"
)

// TestCustomDeployStepFromTheStepsDir: an executable in the custom steps
// directory is a deploy step of its name (a non-executable file, or one
// whose name is no step name, is not); get_deploy_steps lists it at
// priority 0 with the agent's own, execute_deploy_step runs it with the
// step's args on its standard input and the node's UUID in its
// environment, its output the step's result, and a failing one fails the
// command with its standard error. A step the agent has not is Ironic's
// HardwareManagerMethodNotFound.
func TestCustomDeployStepFromTheStepsDir(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(t.TempDir(), "ran")
	write := func(name, body string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("install_coreos", "#!/bin/sh\ncat > "+out+"\necho \" $IRONFLOW_NODE_UUID\" >> "+out+"\necho done\n", 0o755)
	write("broken", "#!/bin/sh\necho 'disk on fire' >&2\nexit 3\n", 0o755)
	write("not_executable", "#!/bin/sh\n", 0o644)
	write("bad-name", "#!/bin/sh\n", 0o755)
	steps, err := CustomStepsFromDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range steps {
		names = append(names, s.Name)
	}
	if got := strings.Join(names, " "); got != "broken install_coreos" {
		t.Fatalf("custom steps %q, want broken install_coreos", got)
	}
	if s, err := CustomStepsFromDir(filepath.Join(dir, "missing")); err != nil || s != nil {
		t.Fatalf("a missing dir: %v %v, want no steps and no error", s, err)
	}

	api := newFakeAPI(t)
	_, c := startAgent(t, api, newFileHardware(t, 1<<30), func(cfg *Config) { cfg.CustomDeploySteps = steps })
	ctx := t.Context()
	node := map[string]any{"uuid": api.node}
	list, err := c.GetDeploySteps(ctx, node, nil)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]int{}
	for _, s := range list.Steps {
		listed[s.Interface+"."+s.Step] = s.Priority
	}
	if p, ok := listed["deploy.install_coreos"]; !ok || p != 0 {
		t.Fatalf("get_deploy_steps %v: want deploy.install_coreos at priority 0", listed)
	}
	if _, ok := listed["deploy.write_image"]; !ok {
		t.Fatalf("get_deploy_steps %v lost the agent's own steps", listed)
	}

	run := func(step string) (client.CommandResult, error) {
		r, err := c.ExecuteDeployStep(ctx, client.Step{Interface: "deploy", Step: step, Args: map[string]any{"ignition": "x"}}, node, nil)
		if err != nil {
			return r, err
		}
		return c.WaitCommand(ctx, r.ID, 10*time.Millisecond, nil)
	}
	r, err := run("install_coreos")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(r.CommandResult), `"deploy_result":"done"`) {
		t.Fatalf("result %s, want deploy_result done", r.CommandResult)
	}
	got, _ := os.ReadFile(out)
	if want := `{"ignition":"x"} ` + api.node; strings.TrimSpace(string(got)) != want {
		t.Fatalf("the step read %q, want %q", got, want)
	}
	if _, err := run("broken"); err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("a failing step: %v, want its stderr", err)
	}
	if _, err := run("not_executable"); err == nil || !strings.Contains(err.Error(), "Could not find method: not_executable") {
		t.Fatalf("an unknown step: %v, want HardwareManagerMethodNotFound", err)
	}
}
