package workflows

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/pyliteral"
)

// Activities of the firmware update (hardware activities, each short: the
// wait for the BMC's task is a timer loop in the workflow, so that it
// survives worker restarts and never holds a worker).
const (
	// ActStartFirmwareUpdate shows the step, caches the versions the BMC
	// reports before the first component, and starts one component's
	// update; it returns the task to watch and the wait's bounds.
	ActStartFirmwareUpdate = "StartFirmwareUpdate"
	// ActPollFirmwareTask reads the task once. A BMC that does not answer
	// (it resets itself after a bmc update) is reported in the result,
	// not as an error: the wait goes on until its timeout.
	ActPollFirmwareTask = "PollFirmwareTask"
	// ActRecordFirmware reads the versions back into the store (GET
	// /v1/nodes/{id}/firmware).
	ActRecordFirmware = "RecordFirmware"
)

// FirmwareSetting is one component of the update step's settings.
type FirmwareSetting struct {
	Component string `json:"component"`
	URL       string `json:"url"`
	Checksum  string `json:"checksum,omitempty"`
	// Wait is how long to wait after this component's update (seconds).
	Wait int `json:"wait,omitempty"`
}

// ParseFirmwareSettings checks the update step's args against Ironic's
// firmware interface update schema (firmware_utils.py,
// _FIRMWARE_INTERFACE_UPDATE_SCHEMA: a list of objects with component
// and url, optional wait >= 1, nothing else; ironflow also takes an
// optional checksum) and its component names.
func ParseFirmwareSettings(args json.RawMessage) ([]FirmwareSetting, error) {
	var a struct {
		Settings []map[string]any `json:"settings"`
	}
	if err := json.Unmarshal(args, &a); err != nil || a.Settings == nil {
		return nil, fmt.Errorf("Invalid firmware update %s. Errors: settings must be a list of objects", string(args))
	}
	if len(a.Settings) == 0 {
		return nil, fmt.Errorf("Invalid firmware update []. Errors: no components to update")
	}
	out := make([]FirmwareSetting, 0, len(a.Settings))
	for i, m := range a.Settings {
		bad := func(format string, args ...any) error {
			return fmt.Errorf("Invalid firmware update %s. Errors: settings[%d]: %s", pyliteral.ReprDecoded(anyList(a.Settings)), i, fmt.Sprintf(format, args...))
		}
		var s FirmwareSetting
		for k, v := range m {
			switch k {
			case "component", "url", "checksum":
				str, ok := v.(string)
				if !ok || str == "" {
					return nil, bad("%s must be a non-empty string", k)
				}
				switch k {
				case "component":
					s.Component = str
				case "url":
					s.URL = str
				default:
					s.Checksum = str
				}
			case "wait":
				f, ok := v.(float64)
				if !ok || f != float64(int(f)) || f < 1 {
					return nil, bad("wait must be an integer of at least 1")
				}
				s.Wait = int(f)
			default:
				return nil, bad("Additional properties are not allowed ('%s' was unexpected)", k)
			}
		}
		if s.Component == "" {
			return nil, bad("'component' is a required property")
		}
		if s.URL == "" {
			return nil, bad("'url' is a required property")
		}
		if s.Checksum != "" {
			if _, _, err := ParseFirmwareChecksum(s.Checksum); err != nil {
				return nil, bad("%v", err)
			}
		}
		if s.Component != "bios" && s.Component != "bmc" && !strings.HasPrefix(s.Component, "nic:") {
			return nil, bad("unknown component %q: bios, bmc or nic:<adapter id>", s.Component)
		}
		out = append(out, s)
	}
	return out, nil
}

// ParseFirmwareChecksum reads a component's checksum: a hex digest,
// optionally prefixed by its algorithm ("sha256:<hex>"). A bare digest's
// algorithm is told by its length; 40 hex digits are SHA-1, the one
// Ironic's firmware_utils.verify_checksum computes.
func ParseFirmwareChecksum(c string) (algo, digest string, err error) {
	digest = strings.ToLower(strings.TrimSpace(c))
	if a, d, ok := strings.Cut(digest, ":"); ok {
		algo, digest = a, d
	}
	want := map[string]int{"sha1": 40, "sha256": 64, "sha512": 128}
	byLen := map[int]string{40: "sha1", 64: "sha256", 128: "sha512"}
	if algo == "" {
		algo = byLen[len(digest)]
	}
	n, known := want[algo]
	if !known {
		return "", "", fmt.Errorf("checksum %q: not a SHA-1, SHA-256 or SHA-512 hex digest (optionally prefixed sha1:, sha256: or sha512:)", c)
	}
	if len(digest) != n || strings.Trim(digest, "0123456789abcdef") != "" {
		return "", "", fmt.Errorf("checksum %q: a %s digest is %d hex digits", c, algo, n)
	}
	return algo, digest, nil
}

func anyList(l []map[string]any) []any {
	out := make([]any, len(l))
	for i, m := range l {
		out[i] = m
	}
	return out
}

// FirmwareUpdateInput starts component Index of the step's settings.
type FirmwareUpdateInput struct {
	Node    NodeInfo           `json:"node"`
	Kind    provision.StepKind `json:"kind"`
	Step    provision.Step     `json:"step"`
	Index   int                `json:"index"`
	Setting FirmwareSetting    `json:"setting"`
}

// FirmwareTaskRef is the BMC's task of one component's update and how long
// and how often the workflow watches it (driver_info
// firmware_update_timeout and firmware_update_poll_interval).
type FirmwareTaskRef struct {
	URI          string        `json:"uri,omitempty"`
	Done         bool          `json:"done,omitempty"`
	Timeout      time.Duration `json:"timeout"`
	PollInterval time.Duration `json:"poll_interval"`
}

// FirmwareTaskInput reads one task.
type FirmwareTaskInput struct {
	Node      NodeInfo `json:"node"`
	Component string   `json:"component"`
	URI       string   `json:"uri"`
}

// FirmwareTaskState is a task as the BMC last reported it; Unreachable says
// why it could not be read this time.
type FirmwareTaskState struct {
	State       string   `json:"state,omitempty"`
	Percent     int      `json:"percent,omitempty"`
	Done        bool     `json:"done,omitempty"`
	Failed      bool     `json:"failed,omitempty"`
	Messages    []string `json:"messages,omitempty"`
	Unreachable string   `json:"unreachable,omitempty"`
	// ResetRequired: the BMC applies the image at the host's next reset.
	ResetRequired bool `json:"reset_required,omitempty"`
}

// FirmwareRecordInput reads the node's versions back.
type FirmwareRecordInput struct {
	Node NodeInfo           `json:"node"`
	Kind provision.StepKind `json:"kind"`
}

// firmwareUpdate runs the update step: each component in order, its task
// watched to its end by a timer loop of short activities, then the
// versions read back. A failed or stalled task fails the step with the
// task's messages; the operator's retry runs the step again from its first
// component, abort ends the operation.
//
// With underAgent (the agent runs on the node) a reboot for the host's
// reset goes into the agent (rebootIntoAgent), and intoAgent says so: the
// caller then waits for the agent's call-back before the plan goes on.
func (r *run) firmwareUpdate(kind provision.StepKind, s provision.Step, underAgent bool) (intoAgent bool, err error) {
	settings, err := ParseFirmwareSettings(s.Args)
	if err != nil {
		return false, err
	}
	for i, fs := range settings {
		var ref FirmwareTaskRef
		if err := r.hw.call(ActStartFirmwareUpdate, FirmwareUpdateInput{Node: r.node, Kind: kind, Step: s, Index: i, Setting: fs}, &ref); err != nil {
			return intoAgent, err
		}
		if !ref.Done {
			rebooted, err := r.waitFirmwareTask(s, fs, ref, underAgent)
			intoAgent = intoAgent || rebooted
			if err != nil {
				return intoAgent, err
			}
		}
		if fs.Wait > 0 {
			if err := workflow.Sleep(r.ctx, time.Duration(fs.Wait)*time.Second); err != nil {
				return intoAgent, err
			}
		}
	}
	r.rec.status.Progress = ""
	return intoAgent, r.hw.call(ActRecordFirmware, FirmwareRecordInput{Node: r.node, Kind: kind}, nil)
}

// firmwareStep runs the update step s as the operation's step; when it
// rebooted the node into the agent (underAgent), the plan goes on only
// once the agent has called back from that boot, as Ironic's update step
// returns the wait state after reboot_to_finish_step.
func (r *run) firmwareStep(kind provision.StepKind, s provision.Step, underAgent bool) error {
	intoAgent := false
	if err := r.step(s.Name(), func() error {
		rebooted, err := r.firmwareUpdate(kind, s, underAgent)
		intoAgent = intoAgent || rebooted
		return err
	}); err != nil {
		return err
	}
	if !intoAgent {
		return nil
	}
	return r.waitAgentAfter(s) // workflows/bios.go
}

// rebootIntoAgent reboots the node for step s while the agent runs on it,
// as Ironic's reboot_to_finish_step: the agent's token goes (the new boot
// looks up and gets a new one), its boot is prepared again and the next
// boot points at it.
func (r *run) rebootIntoAgent(s provision.Step, why string) error {
	active, _ := r.agentStates()
	if err := r.rec.record(RecordStateInput{To: active, Target: r.rec.target, ClearAgent: true,
		Event: fmt.Sprintf("Step %s reboots the node (%s): it boots into the agent again; the agent token is removed", s.Name(), why)}); err != nil {
		return err
	}
	return r.bootAgent()
}

// waitFirmwareTask polls the task every PollInterval until it ends or
// Timeout passes. A BMC that does not answer for a while (it resets
// itself) is no failure until the timeout. intoAgent reports a reboot into
// the agent (underAgent, changeFirmwareRebootIntoAgent).
func (r *run) waitFirmwareTask(s provision.Step, fs FirmwareSetting, ref FirmwareTaskRef, underAgent bool) (intoAgent bool, err error) {
	deadline := workflow.Now(r.ctx).Add(ref.Timeout)
	var last FirmwareTaskState
	rebooted := false
	for {
		if err := workflow.Sleep(r.ctx, ref.PollInterval); err != nil {
			return intoAgent, err
		}
		var st FirmwareTaskState
		if err := r.hw.call(ActPollFirmwareTask, FirmwareTaskInput{Node: r.node, Component: fs.Component, URI: ref.URI}, &st); err != nil {
			return intoAgent, err
		}
		if st.Unreachable == "" {
			last = st
			r.rec.status.Progress = fmt.Sprintf("firmware %s: task %s %s %d%%", fs.Component, ref.URI, st.State, st.Percent)
		} else {
			r.rec.status.Progress = fmt.Sprintf("firmware %s: BMC not answering (%s)", fs.Component, st.Unreachable)
		}
		if st.ResetRequired && !st.Done && !rebooted {
			// The BMC applies the image when the host resets (a BIOS):
			// reboot the node, as Ironic's update step does after it
			// starts a component's update, and keep watching the task.
			rebooted = true
			// With the agent on the node the reboot goes back into it.
			if underAgent {
				intoAgent = true
				if err := r.rebootIntoAgent(s, fmt.Sprintf("the BMC applies the %s image at the host's reset", fs.Component)); err != nil {
					return intoAgent, err
				}
			} else if err := r.hw.power("rebooting"); err != nil {
				return intoAgent, err
			}
			r.rec.status.Progress = fmt.Sprintf("firmware %s: task %s waits for the host's reset: node rebooted", fs.Component, ref.URI)
		}
		if st.Done {
			if st.Failed {
				return intoAgent, fmt.Errorf("firmware update of %s from %s failed: task %s ended %s: %s", fs.Component, fs.URL, ref.URI, st.State, taskMessages(st.Messages))
			}
			return intoAgent, nil
		}
		if !workflow.Now(r.ctx).Before(deadline) {
			why := fmt.Sprintf("last seen %s at %d%%", taskStateName(last.State), last.Percent)
			if st.Unreachable != "" {
				why += "; the BMC does not answer: " + st.Unreachable
			}
			if len(last.Messages) > 0 {
				why += ": " + taskMessages(last.Messages)
			}
			return intoAgent, fmt.Errorf("firmware update of %s from %s did not finish within %s: task %s %s", fs.Component, fs.URL, ref.Timeout, ref.URI, why)
		}
	}
}

func taskMessages(m []string) string {
	if len(m) == 0 {
		return "the BMC gave no message"
	}
	return strings.Join(m, "; ")
}

func taskStateName(s string) string {
	if s == "" {
		return "in no known state"
	}
	return s
}
