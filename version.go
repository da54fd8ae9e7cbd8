// Package ironflow holds what the whole repository shares about itself: the
// release it is (VERSION beside this file; docs/versioning.md says what a
// release promises to the workflows in flight).
package ironflow

import (
	_ "embed"
	"runtime/debug"
	"strings"
)

//go:embed VERSION
var version string

// Version is the release this tree is, from VERSION: "0.1.0" at the
// release, "0.2.0-dev" on the way to the next (docs/versioning.md).
func Version() string { return strings.TrimSpace(version) }

// commit is set by the build (make build: -ldflags "-X
// github.com/ironflow/ironflow.commit=..."), which works where the Go
// toolchain records no version control information (-buildvcs=false).
var commit string

// Commit is the git commit the running binary was built from: the one the
// build set, else the one the Go toolchain recorded (debug.ReadBuildInfo,
// vcs.revision, with "-dirty" when the tree had uncommitted changes); ""
// when neither is known (go run, -buildvcs=false without make).
func Commit() string {
	if commit != "" {
		return commit
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	var rev string
	var dirty bool
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev != "" && dirty {
		rev += "-dirty"
	}
	return rev
}
