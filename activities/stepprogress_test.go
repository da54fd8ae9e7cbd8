package activities

import (
	"strings"
	"testing"

	"github.com/ironflow/ironflow/agent/client"
)

// A burn-in's report is the step's progress, its checkpoint kept as JSON;
// an image download's byte counts are not; an oversized checkpoint is
// dropped rather than carried into the node and the workflow's history.
func TestStepProgressKeepsABurninsCheckpoint(t *testing.T) {
	p := stepProgress(client.Progress{Stage: "burnin_cpu: 2 CPUs", Fraction: 0.25, ElapsedSeconds: 15,
		Checkpoint: map[string]any{"step": "burnin_cpu", "ops": 12.0}}, true)
	if p == nil || p.Stage != "burnin_cpu: 2 CPUs" || p.Fraction != 0.25 || p.ElapsedSeconds != 15 ||
		string(p.Checkpoint) != `{"ops":12,"step":"burnin_cpu"}` {
		t.Fatalf("burn-in progress %+v (checkpoint %s)", p, p.Checkpoint)
	}
	if p := stepProgress(client.Progress{BytesDownloaded: 10, TotalBytes: 100, Stage: "downloading"}, true); p != nil {
		t.Fatalf("an image download is not step progress: %+v", p)
	}
	if p := stepProgress(client.Progress{}, false); p != nil {
		t.Fatalf("no progress: %+v", p)
	}
	big := stepProgress(client.Progress{Fraction: 0.5, Checkpoint: map[string]any{"x": strings.Repeat("a", maxCheckpointBytes)}}, true)
	if big == nil || big.Checkpoint != nil || big.Fraction != 0.5 {
		t.Fatalf("oversized checkpoint: %+v", big)
	}
}
