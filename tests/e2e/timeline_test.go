package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/payload"
	"github.com/ironflow/ironflow/workflows"
)

// TestTimelineFromTemporalHistory reads a history in the shape
// `temporal workflow show -o json` prints.
func TestTimelineFromTemporalHistory(t *testing.T) {
	la := base64.StdEncoding.EncodeToString([]byte(`{"ActivityID":"1","ActivityType":"RecordState"}`))
	raw := `{"events":[
	{"eventId":"1","eventTime":"2026-11-30T04:00:00Z","eventType":"EVENT_TYPE_WORKFLOW_EXECUTION_STARTED"},
	{"eventId":"5","eventTime":"2026-11-30T04:00:00.5Z","eventType":"EVENT_TYPE_MARKER_RECORDED",
	 "markerRecordedEventAttributes":{"markerName":"LocalActivity","details":{"data":{"payloads":[{"data":"` + la + `"}]}}}},
	{"eventId":"6","eventTime":"2026-11-30T04:00:01Z","eventType":"EVENT_TYPE_ACTIVITY_TASK_SCHEDULED",
	 "activityTaskScheduledEventAttributes":{"activityType":{"name":"SetPower"}}},
	{"eventId":"8","eventTime":"2026-11-30T04:00:03.5Z","eventType":"EVENT_TYPE_ACTIVITY_TASK_COMPLETED",
	 "activityTaskCompletedEventAttributes":{"scheduledEventId":"6"}},
	{"eventId":"9","eventTime":"2026-11-30T04:00:04Z","eventType":"EVENT_TYPE_TIMER_STARTED",
	 "timerStartedEventAttributes":{"startToFireTimeout":"1800s"}},
	{"eventId":"10","eventTime":"2026-11-30T04:00:30Z","eventType":"EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED",
	 "workflowExecutionSignaledEventAttributes":{"signalName":"agent-heartbeat"}},
	{"eventId":"11","eventTime":"2026-11-30T04:00:40Z","eventType":"EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED",
	 "workflowExecutionSignaledEventAttributes":{"signalName":"agent-heartbeat"}},
	{"eventId":"12","eventTime":"2026-11-30T04:00:41Z","eventType":"EVENT_TYPE_ACTIVITY_TASK_SCHEDULED",
	 "activityTaskScheduledEventAttributes":{"activityType":{"name":"RunAgentStep"}}},
	{"eventId":"14","eventTime":"2026-11-30T04:00:42Z","eventType":"EVENT_TYPE_ACTIVITY_TASK_FAILED",
	 "activityTaskFailedEventAttributes":{"scheduledEventId":"12"}},
	{"eventId":"15","eventTime":"2026-11-30T04:00:43Z","eventType":"EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED"}
	]}`
	lines, err := timeline([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(lines, "\n")
	for _, want := range []string{
		"   +0.0s  workflow_execution_started\n   +0.5s  local activity RecordState\n   +1.0s  activity SetPower took 2.5s\n   +4.0s  timer 1800s\n",
		"  +30.0s  first signal agent-heartbeat\n  +41.0s  activity RunAgentStep took 1.0s (failed)\n  +43.0s  workflow_execution_completed\n",
		"signals agent-heartbeat: 2\n10 history events",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("timeline lacks\n%s\ngot:\n%s", want, got)
		}
	}
	if _, err := timeline([]byte(`{"events":[]}`)); err == nil {
		t.Error("an empty history gave no error")
	}
}

// TestPowerActionsFromTemporalHistory reads the SetPower inputs of a
// history in the shape `temporal workflow show -o json` prints.
func TestPowerActionsFromTemporalHistory(t *testing.T) {
	in := func(action string) string {
		return base64.StdEncoding.EncodeToString([]byte(`{"node":{"uuid":"n1"},"action":"` + action + `"}`))
	}
	raw := `{"events":[
	{"eventId":"5","eventType":"EVENT_TYPE_ACTIVITY_TASK_SCHEDULED",
	 "activityTaskScheduledEventAttributes":{"activityType":{"name":"SetBootDevice"},"input":{"payloads":[{"data":"e30="}]}}},
	{"eventId":"6","eventType":"EVENT_TYPE_ACTIVITY_TASK_SCHEDULED",
	 "activityTaskScheduledEventAttributes":{"activityType":{"name":"SetPower"},"input":{"payloads":[{"data":"` + in("rebooting") + `"}]}}},
	{"eventId":"9","eventType":"EVENT_TYPE_ACTIVITY_TASK_SCHEDULED",
	 "activityTaskScheduledEventAttributes":{"activityType":{"name":"SetPower"},"input":{"payloads":[{"data":"` + in("power off") + `"}]}}},
	{"eventId":"12","eventType":"EVENT_TYPE_ACTIVITY_TASK_SCHEDULED",
	 "activityTaskScheduledEventAttributes":{"activityType":{"name":"SetPower"},"input":{"payloads":[{"data":"` + in("power on") + `"}]}}}
	]}`
	acts, err := powerActions([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(acts, ","); got != "rebooting,power off,power on" {
		t.Errorf("power actions %q", got)
	}
	if n := countPowerOns(acts); n != 2 {
		t.Errorf("%d power-ons, want 2", n)
	}
	if _, err := powerActions([]byte(`{"events":[{"activityTaskScheduledEventAttributes":{"activityType":{"name":"SetPower"}}}]}`)); err == nil {
		t.Error("a SetPower without input gave no error")
	}
}

// printNodeHistory logs the node's history as the API keeps it.
func printNodeHistory(t *testing.T, s *stack, uuid string) {
	t.Helper()
	if out, err := s.baremetal(t, "node", "history", "list", uuid); err == nil {
		t.Logf("node history of %s:\n%s", uuid, out)
	} else {
		t.Logf("node history: %v", err)
	}
}

// printTimeline logs the Temporal history of the node's latest workflow
// (node-<uuid>) as a timeline: when each activity, local activity, timer
// and signal happened and how long activities took, so slow phases show.
func printTimeline(t *testing.T, s *stack, uuid, what string) {
	t.Helper()
	out, err := workflowHistory(s, uuid)
	if err != nil {
		t.Log(err)
		return
	}
	lines, err := timeline(out)
	if err != nil {
		t.Logf("temporal history of node-%s: %v", uuid, err)
		return
	}
	t.Logf("timeline of %s, workflow node-%s (offsets from its start):\n%s", what, uuid, strings.Join(lines, "\n"))
}

// workflowHistory is the latest node-<uuid> workflow's history as
// `temporal workflow show -o json` prints it.
func workflowHistory(s *stack, uuid string) ([]byte, error) {
	cmd := s.lab.Command(temporalCLI(), "workflow", "show", "--workflow-id", "node-"+uuid,
		"--address", "127.0.0.1:"+temporalPort, "--output", "json", "--no-json-shorthand-payloads")
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("temporal workflow show node-%s: %w", uuid, err)
	}
	// The payloads are encrypted (package payload): open them with the
	// stack's key, as an operator reads them through the codec server.
	var keys payload.Keys
	if s.split != nil {
		keys, err = payload.LoadKeys(s.split.PayloadKey, "", "")
	} else {
		keys, err = payload.LoadKeys("", filepath.Join(s.dataDir, "payload.key"), "")
	}
	if err != nil {
		return nil, err
	}
	codec, err := payload.NewCodec(keys)
	if err != nil {
		return nil, err
	}
	return payload.DecodeHistoryJSON(context.Background(), codec, out)
}

// powerActions lists the power actions the workflow asked of the BMC
// (SetPower activities, by their input's action), in order.
func powerActions(raw []byte) ([]string, error) {
	var h struct {
		Events []struct {
			Scheduled *struct {
				ActivityType struct{ Name string } `json:"activityType"`
				Input        struct {
					Payloads []struct {
						Data []byte `json:"data"`
					} `json:"payloads"`
				} `json:"input"`
			} `json:"activityTaskScheduledEventAttributes"`
		} `json:"events"`
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		return nil, fmt.Errorf("decode history: %w", err)
	}
	var actions []string
	for _, e := range h.Events {
		if e.Scheduled == nil || e.Scheduled.ActivityType.Name != "SetPower" {
			continue
		}
		var in workflows.PowerInput
		if len(e.Scheduled.Input.Payloads) == 0 || json.Unmarshal(e.Scheduled.Input.Payloads[0].Data, &in) != nil {
			return nil, errors.New("a SetPower activity without a readable input")
		}
		actions = append(actions, in.Action)
	}
	return actions, nil
}

// historyEvent is the part of a Temporal history event (protojson, as
// `temporal workflow show -o json` prints it) the timeline needs.
type historyEvent struct {
	EventID   string    `json:"eventId"`
	EventTime time.Time `json:"eventTime"`
	EventType string    `json:"eventType"`
	Scheduled *struct {
		ActivityType struct{ Name string } `json:"activityType"`
	} `json:"activityTaskScheduledEventAttributes"`
	Completed *struct {
		ScheduledEventID string `json:"scheduledEventId"`
	} `json:"activityTaskCompletedEventAttributes"`
	Failed *struct {
		ScheduledEventID string `json:"scheduledEventId"`
	} `json:"activityTaskFailedEventAttributes"`
	Marker *struct {
		MarkerName string                     `json:"markerName"`
		Details    map[string]json.RawMessage `json:"details"`
	} `json:"markerRecordedEventAttributes"`
	Timer *struct {
		StartToFireTimeout string `json:"startToFireTimeout"`
	} `json:"timerStartedEventAttributes"`
	Signal *struct {
		SignalName string `json:"signalName"`
	} `json:"workflowExecutionSignaledEventAttributes"`
}

// markerText names a marker; a local activity's marker carries the
// activity type in its JSON payload.
func markerText(name string, details map[string]json.RawMessage) string {
	var data struct {
		Payloads []struct {
			Data []byte `json:"data"`
		} `json:"payloads"`
	}
	if name == "LocalActivity" && json.Unmarshal(details["data"], &data) == nil && len(data.Payloads) > 0 {
		var la struct{ ActivityType string }
		if json.Unmarshal(data.Payloads[0].Data, &la) == nil && la.ActivityType != "" {
			return "local activity " + la.ActivityType
		}
	}
	return "marker " + name
}

func timeline(raw []byte) ([]string, error) {
	var h struct {
		Events []historyEvent `json:"events"`
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		return nil, fmt.Errorf("decode history: %w", err)
	}
	if len(h.Events) == 0 {
		return nil, errors.New("empty history")
	}
	start := h.Events[0].EventTime
	type act struct {
		name       string
		at, end    time.Time
		ok, closed bool
	}
	acts := map[string]*act{}
	var order []string
	signals := map[string]int{}
	var lines []string
	off := func(tm time.Time) string { return fmt.Sprintf("%+7.1fs", tm.Sub(start).Seconds()) }
	for _, e := range h.Events {
		typ := strings.TrimPrefix(e.EventType, "EVENT_TYPE_")
		switch {
		case e.Scheduled != nil:
			acts[e.EventID] = &act{name: e.Scheduled.ActivityType.Name, at: e.EventTime}
			order = append(order, e.EventID)
		case e.Completed != nil:
			if a := acts[e.Completed.ScheduledEventID]; a != nil {
				a.end, a.ok, a.closed = e.EventTime, true, true
			}
		case e.Failed != nil:
			if a := acts[e.Failed.ScheduledEventID]; a != nil {
				a.end, a.closed = e.EventTime, true
			}
		case e.Marker != nil:
			lines = append(lines, fmt.Sprintf("%s  %s", off(e.EventTime), markerText(e.Marker.MarkerName, e.Marker.Details)))
		case e.Timer != nil:
			lines = append(lines, fmt.Sprintf("%s  timer %s", off(e.EventTime), e.Timer.StartToFireTimeout))
		case e.Signal != nil:
			if signals[e.Signal.SignalName] == 0 {
				lines = append(lines, fmt.Sprintf("%s  first signal %s", off(e.EventTime), e.Signal.SignalName))
			}
			signals[e.Signal.SignalName]++
		case strings.HasPrefix(typ, "WORKFLOW_EXECUTION_") && typ != "WORKFLOW_EXECUTION_SIGNALED":
			lines = append(lines, fmt.Sprintf("%s  %s", off(e.EventTime), strings.ToLower(typ)))
		}
	}
	for _, id := range order {
		a := acts[id]
		status := "still running"
		if a.closed {
			status = fmt.Sprintf("took %.1fs", a.end.Sub(a.at).Seconds())
			if !a.ok {
				status += " (failed)"
			}
		}
		lines = append(lines, fmt.Sprintf("%s  activity %s %s", off(a.at), a.name, status))
	}
	sort.SliceStable(lines, func(i, j int) bool { return lines[i] < lines[j] })
	for name, n := range signals {
		lines = append(lines, fmt.Sprintf("signals %s: %d", name, n))
	}
	lines = append(lines, fmt.Sprintf("%d history events", len(h.Events)))
	return lines, nil
}
