package embedded

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestProcessLogAndKill(t *testing.T) {
	log := filepath.Join(t.TempDir(), "sh.log")
	// The child sleep shares the process group: Kill must end it too.
	p, err := StartProcess("sh", log, exec.Command("/bin/sh", "-c", "echo started; sleep 600 & wait"))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(p.Tail(100), "started") {
		if time.Now().After(deadline) {
			t.Fatalf("no output in the log: %q", p.Tail(100))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !p.Running() {
		t.Fatal("the process ended on its own")
	}
	p.Kill()
	if p.Running() || p.Err() == nil {
		t.Fatalf("after Kill: running %v, err %v", p.Running(), p.Err())
	}
}

func TestProcessStopGivesUpAfterGrace(t *testing.T) {
	// The shell ignores SIGTERM: Stop must kill it after the grace.
	p, err := StartProcess("sh", filepath.Join(t.TempDir(), "sh.log"), exec.Command("/bin/sh", "-c", "trap '' TERM; sleep 600 & wait"))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	p.Stop(300 * time.Millisecond)
	if p.Running() {
		t.Fatal("still running after Stop")
	}
	if took := time.Since(start); took < 300*time.Millisecond || took > 10*time.Second {
		t.Fatalf("Stop took %s, want about the grace", took)
	}
}

func TestTailReadsTheEnd(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(path, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := Tail(path, 4); got != "6789" {
		t.Fatalf("Tail(4) = %q, want 6789", got)
	}
	if got := Tail(filepath.Join(t.TempDir(), "missing"), 10); !strings.HasPrefix(got, "(") {
		t.Fatalf("Tail of a missing file = %q, want the error in parentheses", got)
	}
}
