package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	tlog "go.temporal.io/sdk/log"

	"github.com/ironflow/ironflow/payload"
	"github.com/ironflow/ironflow/workflows"
)

// timelineSettings builds ironflow timeline's flags.
func timelineSettings() (s *settings, temporal, namespace *string, keys payloadKeyFlags, tlsFlags temporalTLSFlags) {
	s = newSettings("timeline")
	temporal = s.String("temporal-address", defaultTemporalAddress, "Temporal frontend host:port", "TEMPORAL_ADDRESS")
	namespace = s.String("temporal-namespace", defaultNamespace, "Temporal namespace", "TEMPORAL_NAMESPACE")
	keys = addPayloadKeyFlags(s)
	tlsFlags = addTemporalTLSFlags(s)
	return s, temporal, namespace, keys, tlsFlags
}

// runTimeline prints each step of a node's latest workflow with its start
// and duration, from the workflow history: a slow phase shows at a glance.
func runTimeline(ctx context.Context, args []string) error {
	s, temporal, namespace, keys, tlsFlags := timelineSettings()
	if err := s.parse(args); err != nil {
		return err
	}
	if s.fs.NArg() != 1 {
		return fmt.Errorf("usage: ironflow timeline [flags] <node-uuid>")
	}
	// The key is optional here: without it, activities, timers and signals
	// still show; local activities' names are inside encrypted markers.
	var codec *payload.Codec
	if keys.set() {
		var err error
		if codec, err = keys.codec(); err != nil {
			return err
		}
	}
	opts := client.Options{HostPort: *temporal, Namespace: *namespace, Logger: tlog.NewStructuredLogger(slog.New(slog.DiscardHandler))}
	if err := tlsFlags.apply(&opts); err != nil {
		return err
	}
	codec.Apply(&opts)
	c, err := client.Dial(opts)
	if err != nil {
		return fmt.Errorf("connect to Temporal at %s: %w", *temporal, err)
	}
	defer c.Close()
	dc := converter.GetDefaultDataConverter()
	if codec != nil {
		dc = payload.DataConverter(codec)
	}
	return printTimeline(ctx, c, dc, s.fs.Arg(0), os.Stdout)
}

// timelineRow is one step of the timeline.
type timelineRow struct {
	start, end time.Time
	what       string
}

func printTimeline(ctx context.Context, c client.Client, dc converter.DataConverter, nodeUUID string, w io.Writer) error {
	it := c.GetWorkflowHistory(ctx, workflows.WorkflowID(nodeUUID), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var (
		rows      []*timelineRow
		scheduled = map[int64]*timelineRow{}
		timers    = map[int64]*timelineRow{}
		first     time.Time
		events    int
		lastEvent time.Time
		wfType    string
		sealed    int
	)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return fmt.Errorf("read the history of workflow %s: %w", workflows.WorkflowID(nodeUUID), err)
		}
		events++
		t := ev.GetEventTime().AsTime()
		lastEvent = t
		if first.IsZero() {
			first = t
		}
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			wfType = ev.GetWorkflowExecutionStartedEventAttributes().GetWorkflowType().GetName()
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			r := &timelineRow{start: t, what: ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()}
			scheduled[ev.GetEventId()] = r
			rows = append(rows, r)
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			if r := scheduled[ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()]; r != nil {
				r.end = t
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED:
			if r := scheduled[ev.GetActivityTaskFailedEventAttributes().GetScheduledEventId()]; r != nil {
				r.end, r.what = t, r.what+" (failed)"
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
			if r := scheduled[ev.GetActivityTaskTimedOutEventAttributes().GetScheduledEventId()]; r != nil {
				r.end, r.what = t, r.what+" (timed out)"
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCELED:
			if r := scheduled[ev.GetActivityTaskCanceledEventAttributes().GetScheduledEventId()]; r != nil {
				r.end, r.what = t, r.what+" (canceled)"
			}
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			name, encrypted := localActivityName(ev, dc)
			switch {
			case name != "":
				rows = append(rows, &timelineRow{start: t, end: t, what: name + " (local)"})
			case encrypted:
				sealed++
			}
		case enumspb.EVENT_TYPE_TIMER_STARTED:
			a := ev.GetTimerStartedEventAttributes()
			r := &timelineRow{start: t, what: "wait (timer " + a.GetStartToFireTimeout().AsDuration().String() + ")"}
			timers[ev.GetEventId()] = r
			rows = append(rows, r)
		case enumspb.EVENT_TYPE_TIMER_FIRED:
			if r := timers[ev.GetTimerFiredEventAttributes().GetStartedEventId()]; r != nil {
				r.end, r.what = t, r.what+" fired"
			}
		case enumspb.EVENT_TYPE_TIMER_CANCELED:
			if r := timers[ev.GetTimerCanceledEventAttributes().GetStartedEventId()]; r != nil {
				r.end = t
			}
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			rows = append(rows, &timelineRow{start: t, end: t, what: "signal " + ev.GetWorkflowExecutionSignaledEventAttributes().GetSignalName()})
		}
	}
	if events == 0 {
		return fmt.Errorf("no workflow history for node %s", nodeUUID)
	}
	fmt.Fprintf(w, "%s for node %s: %d history events, %s\n", wfType, nodeUUID, events, lastEvent.Sub(first).Round(time.Millisecond))
	if sealed > 0 {
		fmt.Fprintf(w, "%d local activities not shown: their markers are encrypted (give --payload-key)\n", sealed)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "START\tDURATION\tSTEP")
	for _, r := range rows {
		d := "running"
		if !r.end.IsZero() {
			d = r.end.Sub(r.start).Round(time.Millisecond).String()
		}
		fmt.Fprintf(tw, "+%s\t%s\t%s\n", r.start.Sub(first).Round(time.Millisecond), d, r.what)
	}
	return tw.Flush()
}

// localActivityName reads the activity type from a local activity's marker
// through dc; encrypted says the marker could not be opened without a key.
func localActivityName(ev *historypb.HistoryEvent, dc converter.DataConverter) (name string, encrypted bool) {
	a := ev.GetMarkerRecordedEventAttributes()
	if a.GetMarkerName() != "LocalActivity" {
		return "", false
	}
	p := a.GetDetails()["data"]
	if p == nil || len(p.GetPayloads()) == 0 {
		return "", false
	}
	var data struct {
		ActivityType string `json:"ActivityType"`
	}
	if err := dc.FromPayload(p.GetPayloads()[0], &data); err != nil {
		return "", payload.Encrypted(p.GetPayloads()[0])
	}
	return strings.TrimSpace(data.ActivityType), false
}
