package e2e

import (
	"encoding/base64"
	"strings"
	"testing"
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
