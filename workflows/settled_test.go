package workflows_test

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/workflows"
)

// TestSettledStatesEndEveryRecordedHistory checks what the API relies on
// when it records a verb's transition from a settled state without asking
// Temporal whether the node's workflow still runs (State.Settled): in every
// recorded history, of this release and the earlier ones, a workflow that
// moved the node to a settled state (its ProvisionState search attribute)
// runs no activity after it, local or regular, and so writes the node no
// more.
func TestSettledStatesEndEveryRecordedHistory(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "history", "*", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded histories: %v", err)
	}
	settledIn := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var h struct {
			Events []struct {
				EventID   string `json:"eventId"`
				EventType string `json:"eventType"`
				Upsert    *struct {
					SearchAttributes struct {
						IndexedFields map[string]struct {
							Data string `json:"data"`
						} `json:"indexedFields"`
					} `json:"searchAttributes"`
				} `json:"upsertWorkflowSearchAttributesEventAttributes"`
				Marker *struct {
					MarkerName string `json:"markerName"`
				} `json:"markerRecordedEventAttributes"`
			} `json:"events"`
		}
		if err := json.Unmarshal(b, &h); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		settled := provision.State("")
		for _, e := range h.Events {
			if e.Upsert != nil {
				if p, ok := e.Upsert.SearchAttributes.IndexedFields[workflows.SearchAttrProvisionState]; ok {
					raw, err := base64.StdEncoding.DecodeString(p.Data)
					var state string
					if err == nil {
						err = json.Unmarshal(raw, &state)
					}
					if err != nil {
						t.Fatalf("%s: event %s: the ProvisionState upsert: %v", f, e.EventID, err)
					}
					if settled != "" {
						t.Errorf("%s: event %s moves the node to %q after it settled in %q", f, e.EventID, state, settled)
					}
					if provision.State(state).Settled() {
						settled = provision.State(state)
						settledIn++
					}
				}
			}
			if settled == "" {
				continue
			}
			localActivity := e.Marker != nil && e.Marker.MarkerName == "LocalActivity"
			if localActivity || e.EventType == "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED" {
				t.Errorf("%s: event %s (%s) runs an activity after the node settled in %q: a verb may already have moved the node on",
					f, e.EventID, e.EventType, settled)
			}
		}
	}
	// The check must have something to check: most recorded operations end
	// in a settled state.
	if settledIn < len(files)/2 {
		t.Errorf("only %d of %d recorded histories settle the node: the ProvisionState upserts were not read", settledIn, len(files))
	}
	t.Logf("%d of %d recorded histories settle the node; none runs an activity after", settledIn, len(files))
}
