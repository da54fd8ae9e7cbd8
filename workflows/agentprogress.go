package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/provision"
)

// ErrTypeAgentCommandLost: the agent answers, but no longer knows the
// command of the running step — the machine rebooted (a reset, a crash)
// and a fresh agent called back. The error's details are an
// AgentCommandLost.
const ErrTypeAgentCommandLost = "AgentCommandLost"

// AgentCommandLost is what RunAgentStep knew of a step whose command the
// agent lost: the step's last published progress, with the checkpoint a
// re-run resumes from (small: counts and times, never data).
type AgentCommandLost struct {
	CommandID string        `json:"command_id,omitempty"`
	Progress  *StepProgress `json:"progress,omitempty"`
}

// StepProgress is a running in-band step's progress as the agent publishes
// it in its command's result (progress.stage, fraction, elapsed_seconds,
// checkpoint): RunAgentStep keeps the latest in the node's
// driver_internal_info under StepProgressKey, so that clients see how far
// a long step (a burn-in, an erase) is.
type StepProgress struct {
	Stage          string          `json:"stage,omitempty"`
	Fraction       float64         `json:"fraction,omitempty"`
	ElapsedSeconds float64         `json:"elapsed_seconds,omitempty"`
	Checkpoint     json.RawMessage `json:"checkpoint,omitempty"`
}

// StepProgressKey is the driver_internal_info key that holds the running
// step's progress: clean_step_progress, service_step_progress or
// deploy_step_progress, next to clean_step_index and its kin. It is reset
// when the next step starts and removed with the plan.
func StepProgressKey(kind provision.StepKind) string { return string(kind) + "_step_progress" }

// maxStepResumes bounds how often one step is re-run after the machine
// rebooted under it: a machine that keeps resetting (a burn-in that
// crashes it) fails the step instead of looping.
const maxStepResumes = 3

// maxResultInHistory bounds the step result a history event quotes.
const maxResultInHistory = 1024

// agentStep runs one in-band step on the agent (agentStepOnce). When the
// machine reboots under it — the agent calls back fresh and no longer knows
// the command — the step runs again on the new agent with the "checkpoint"
// argument set to the last checkpoint the step published, so that a
// burn-in resumes where it was instead of failing or starting from zero
// (README.md, "Step progress, resume after a reboot, results in the
// history"). The step's result is kept in the agent session's lastResult
// for the event that ends it.
func (r *run) agentStep(kind provision.StepKind, s provision.Step) error {
	r.agent.lastResult = ""
	for resumes := 0; ; resumes++ {
		res, err := r.agentStepOnce(kind, s)
		if err == nil {
			r.agent.lastResult = res.Result
			return nil
		}
		lost, ok := commandLost(err)
		if !ok || resumes >= maxStepResumes {
			return err
		}
		next, from := withCheckpoint(s, lost.Progress)
		event := fmt.Sprintf("The agent lost step %s (the machine rebooted): running it again", s.Name())
		if from != "" {
			event += " from its checkpoint (" + from + ")"
		}
		if err := r.rec.record(RecordStateInput{To: r.rec.status.ProvisionState, Target: r.rec.target, Event: event}); err != nil {
			return err
		}
		s = next
		if r.rec.current != nil {
			cur := s
			r.rec.current = &cur
		}
	}
}

// commandLost reports whether err is RunAgentStep's ErrTypeAgentCommandLost,
// with its details.
func commandLost(err error) (AgentCommandLost, bool) {
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != ErrTypeAgentCommandLost {
		return AgentCommandLost{}, false
	}
	var lost AgentCommandLost
	if app.HasDetails() {
		_ = app.Details(&lost)
	}
	return lost, true
}

// withCheckpoint is s with its "checkpoint" argument set to p's checkpoint
// when the step takes one (its argsinfo names it, or is unknown), and a
// short account of where it resumes ("" when it resumes from nothing).
func withCheckpoint(s provision.Step, p *StepProgress) (provision.Step, string) {
	if p == nil || len(p.Checkpoint) == 0 || string(p.Checkpoint) == "null" {
		return s, ""
	}
	if s.ArgsInfo != nil {
		if _, ok := s.ArgsInfo["checkpoint"]; !ok {
			// The step keeps its checkpoint itself (burnin_disk, on the
			// disks under test): it resumes when simply run again.
			return s, fmt.Sprintf("%.0fs done, kept by the step", p.ElapsedSeconds)
		}
	}
	args := map[string]json.RawMessage{}
	if len(s.Args) > 0 && string(s.Args) != "null" {
		if err := json.Unmarshal(s.Args, &args); err != nil {
			return s, ""
		}
	}
	args["checkpoint"] = p.Checkpoint
	raw, err := json.Marshal(args) // keys sorted: deterministic
	if err != nil {
		return s, ""
	}
	s.Args = raw
	return s, fmt.Sprintf("%.0fs done", p.ElapsedSeconds)
}

// stepResultText is the part of an agent command's result that a history
// event quotes: the step's own result (<kind>_result), bounded, never the
// step's arguments.
func stepResultText(kind provision.StepKind, result string) string {
	if result == "" {
		return ""
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal([]byte(result), &body); err != nil {
		return ""
	}
	r, ok := body[string(kind)+"_result"]
	if !ok || len(r) == 0 || string(r) == "null" {
		return ""
	}
	text := strings.TrimSpace(string(r))
	if len(text) > maxResultInHistory {
		text = text[:maxResultInHistory] + "…"
	}
	return text
}

// stepFinished is the history event of an in-band step that finished: its
// result quoted when the agent reported one (a burn-in's counts, an
// erase's methods), so that the node's history keeps what the step found.
func stepFinished(s provision.Step, kind provision.StepKind, result string) string {
	msg := fmt.Sprintf("Step %s finished", s.Name())
	if text := stepResultText(kind, result); text != "" {
		msg += ": " + text
	}
	return msg
}
