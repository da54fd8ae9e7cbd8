package ironflow

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// The release is VERSION's one line, a semantic version (a pre-release
// suffix between a release's opening and its tag).
func TestVersionIsTheVersionFile(t *testing.T) {
	b, err := os.ReadFile("VERSION")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := Version(), strings.TrimSpace(string(b)); got != want {
		t.Fatalf("Version() = %q, VERSION says %q", got, want)
	}
	if !regexp.MustCompile(`^\d+\.\d+\.\d+(-[0-9A-Za-z.]+)?$`).MatchString(Version()) {
		t.Fatalf("VERSION %q is not a semantic version", Version())
	}
}

// The commit the build sets wins over what the toolchain recorded.
func TestCommitIsTheOneTheBuildSet(t *testing.T) {
	old := commit
	defer func() { commit = old }()
	commit = "abc1234-dirty"
	if got := Commit(); got != "abc1234-dirty" {
		t.Fatalf("Commit() = %q, want the build's abc1234-dirty", got)
	}
}
