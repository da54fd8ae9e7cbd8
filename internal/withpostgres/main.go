// Command withpostgres runs a command with IRONFLOW_TEST_DATABASE_URL
// pointing at a throwaway PostgreSQL cluster it starts (package embedded),
// and stops and removes the cluster when the command ends: make fuzz runs
// its fuzz targets under it, so that storetest (internal/testkit/storetest)
// creates each fuzz process's database on that one cluster instead of
// starting a cluster per process (a fuzz target runs in a coordinator and
// one worker per core, each a process of its own). With
// IRONFLOW_TEST_DATABASE_URL already set, it runs the command on that
// server and starts nothing.
//
// It is tooling for make, never imported by ironflow's code.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/ironflow/ironflow/embedded"
	"github.com/ironflow/ironflow/internal/testkit/storetest"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: withpostgres command [argument...]")
		os.Exit(2)
	}
	os.Exit(run(os.Args[1:]))
}

func run(argv []string) int {
	if os.Getenv(storetest.EnvDatabaseURL) != "" {
		return command(argv)
	}
	dir, err := os.MkdirTemp("", "ironflow-withpostgres-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "withpostgres: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// StartPostgres hands dir to the postgres user when we are root.
	p, err := embedded.StartPostgres(context.Background(), dir, log)
	if err != nil {
		fmt.Fprintf(os.Stderr, "withpostgres: %v\n", err)
		return 1
	}
	// Also stopped if this process is killed before its own Stop.
	if err := p.StopOnExit(true); err != nil {
		fmt.Fprintf(os.Stderr, "withpostgres: %v\n", err)
	}
	defer func() {
		if err := p.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "withpostgres: %v\n", err)
		}
	}()
	os.Setenv(storetest.EnvDatabaseURL, p.URL())
	return command(argv)
}

// command runs argv with this process's environment and returns its exit
// status; an interrupt reaches it through the terminal's process group,
// and this process waits for it to end.
func command(argv []string) int {
	// Caught, not ignored: an ignored signal stays ignored in the child.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGINT, syscall.SIGTERM)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee) && ee.ExitCode() >= 0:
		return ee.ExitCode()
	default:
		fmt.Fprintf(os.Stderr, "withpostgres: %s: %v\n", argv[0], err)
		return 1
	}
}
