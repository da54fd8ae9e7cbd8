package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/ironflow/ironflow/agent/client"
)

// DefaultCustomStepsDir is where the agent looks for custom deploy steps
// (CustomStepsFromDir): each executable file there is a deploy step of its
// file's name. An image builder puts its own there (docs/bmcs-and-boot.md,
// "custom-agent").
const DefaultCustomStepsDir = "/etc/ironflow-agent/deploy-steps.d"

// CustomStep is a deploy step the agent offers besides its own, as IPA
// runs the steps of the hardware managers an image adds: the agent lists it
// in get_deploy_steps (interface deploy) and runs it by name when the
// conductor asks, a deploy_interface custom-agent deploy's user step
// (Metal3's customDeploy.method) typically.
type CustomStep struct {
	// Name is the step's name (deploy.<Name>).
	Name string
	// Priority is the one get_deploy_steps shows; 0 (the default) runs
	// only when a deploy names the step.
	Priority int
	// Args are the optional arguments the step takes, name to
	// description, as its argsinfo shows them: a deploy that gives the step
	// another is refused, as Ironic refuses a step's unexpected arguments
	// (a step from CustomStepsFromDir takes none).
	Args map[string]string
	// Run runs the step with the args the deploy gave it ({} for none) and
	// the node the conductor sent; its result becomes deploy_result.
	Run func(ctx context.Context, args, node map[string]any) (any, error)
}

// customStepName is what a custom step may be called: a step name as
// Ironic's API accepts one.
var customStepName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// CustomStepsFromDir reads dir's executable files as custom deploy steps
// (a missing dir gives none). A step's file runs with the step's args as a
// JSON object on its standard input and the node's UUID in
// IRONFLOW_NODE_UUID; exit status 0 is success, with its standard output
// (trimmed) as the step's result, and any other fails the step with the
// end of its standard error. A file whose name is not a step name (letters,
// digits, underscores) is skipped.
func CustomStepsFromDir(dir string) ([]CustomStep, error) {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("custom deploy steps: %w", err)
	}
	var out []CustomStep
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() || info.Mode().Perm()&0o111 == 0 || !customStepName.MatchString(e.Name()) {
			continue
		}
		out = append(out, CustomStep{Name: e.Name(), Run: execStep(filepath.Join(dir, e.Name()))})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// execStep runs the executable path as a custom step.
func execStep(path string) func(ctx context.Context, args, node map[string]any) (any, error) {
	return func(ctx context.Context, args, node map[string]any) (any, error) {
		in, err := json.Marshal(args)
		if err != nil {
			return nil, err
		}
		cmd := exec.CommandContext(ctx, path)
		cmd.Stdin = bytes.NewReader(in)
		uuid, _ := node["uuid"].(string)
		cmd.Env = append(os.Environ(), "IRONFLOW_NODE_UUID="+uuid)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			msg := strings.TrimSpace(stderr.String())
			if len(msg) > 1024 {
				msg = msg[len(msg)-1024:]
			}
			return nil, fmt.Errorf("custom deploy step %s failed: %v: %s", filepath.Base(path), err, msg)
		}
		return strings.TrimSpace(stdout.String()), nil
	}
}

// customDeploySteps are the configured custom steps as get_deploy_steps
// lists them.
func (a *Agent) customDeploySteps() []client.Step {
	out := make([]client.Step, 0, len(a.cfg.CustomDeploySteps))
	for _, s := range a.cfg.CustomDeploySteps {
		c := client.Step{Step: s.Name, Priority: s.Priority, Interface: "deploy"}
		for name, desc := range s.Args {
			if c.ArgsInfo == nil {
				c.ArgsInfo = map[string]any{}
			}
			c.ArgsInfo[name] = map[string]any{"description": desc, "required": false}
		}
		out = append(out, c)
	}
	return out
}

// customDeployStep is the configured custom step name, if any.
func (a *Agent) customDeployStep(name string) (CustomStep, bool) {
	for _, s := range a.cfg.CustomDeploySteps {
		if s.Name == name {
			return s, true
		}
	}
	return CustomStep{}, false
}
