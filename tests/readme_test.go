package tests

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeFirstSessionRunsAsWritten runs the README's first session with
// the baremetal CLI, line for line, against the real stack: only the
// endpoint is this stack's.
func TestReadmeFirstSessionRunsAsWritten(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(readme)
	i := strings.Index(section, "## A first session with the `baremetal` CLI")
	if i < 0 {
		t.Fatal("README has no first-session section")
	}
	block := regexp.MustCompile("(?s)```sh\n(.*?)```").FindStringSubmatch(section[i:])
	if block == nil {
		t.Fatal("the first-session section has no sh block")
	}
	script := regexp.MustCompile(`(?m)^export OS_ENDPOINT=\S+`).ReplaceAllString(block[1], "export OS_ENDPOINT="+lab.APIURL)
	if !strings.Contains(script, lab.APIURL) {
		t.Fatalf("the walkthrough does not set OS_ENDPOINT:\n%s", block[1])
	}
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the README's first session fails: %v\n--- script\n%s\n--- output\n%s", err, script, out)
	}
	if !strings.Contains(string(out), "Deploy finished") {
		t.Fatalf("the walkthrough's history shows no finished deploy:\n%s", out)
	}
}
