package main

import (
	"context"
	"fmt"
	"os"

	"github.com/ironflow/ironflow"
)

// versionSettings are the flags of `ironflow version`: none.
func versionSettings() *settings { return newSettings("version") }

// runVersion prints the release (VERSION) and the commit the binary was
// built from: what an operator quotes in a bug report, and what
// docs/versioning.md's upgrade procedure compares.
func runVersion(_ context.Context, args []string) error {
	if err := versionSettings().fs.Parse(args); err != nil {
		return err
	}
	commit := ironflow.Commit()
	if commit == "" {
		commit = "unknown (built without version control information)"
	}
	_, err := fmt.Fprintf(os.Stdout, "ironflow %s\ncommit %s\n", ironflow.Version(), commit)
	return err
}
