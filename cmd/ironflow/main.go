// Command ironflow is the whole service in one binary:
//
//	ironflow dev       everything on embedded defaults (PostgreSQL, Temporal dev server, API, worker, PXE)
//	ironflow api       the Ironic-compatible REST API
//	ironflow worker    a Temporal worker: workflows and the hardware activities of its conductor groups
//	ironflow pxe       DHCP, TFTP and HTTP boot services
//	ironflow migrate   apply the database migrations
//	ironflow vbmc      a virtual BMC (Redfish, IPMI) for QEMU virtual machines
//	ironflow timeline  a node's latest workflow, step by step with durations
//	ironflow codec-server  decrypts workflow payloads for the Temporal Web UI's operators
//	ironflow version   the release and the commit of this binary
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

var commands = map[string]func(ctx context.Context, args []string) error{
	"dev":          runDev,
	"api":          runAPICommand,
	"worker":       runWorkerCommand,
	"migrate":      runMigrate,
	"pxe":          runPXECommand,
	"vbmc":         runVBMC,
	"timeline":     runTimeline,
	"rollout":      runRollout,
	"codec-server": runCodecServer,
	"version":      runVersion,
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: ironflow <command> [flags]

commands:
  dev       run everything on embedded defaults (make run)
  api       the Ironic-compatible REST API
  worker    a Temporal worker
  pxe       DHCP, TFTP and HTTP boot services
  migrate   apply the database migrations
  vbmc      a virtual BMC for QEMU virtual machines
  timeline  each step of a node's latest workflow with its start and duration
  rollout   create, watch and steer rollouts (docs/rollouts.md)
  codec-server  decrypt workflow payloads for the Temporal Web UI (authenticated)
  version   the release and the commit of this binary

'ironflow <command> -h' lists the command's flags; every flag can also be
set from the environment as IRONFLOW_<FLAG_NAME>.
`)
}

func main() {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		usage(os.Stdout)
		return
	}
	cmd, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "ironflow: unknown command %q\n\n", os.Args[1])
		usage(os.Stderr)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := cmd(ctx, os.Args[2:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintf(os.Stderr, "ironflow %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

// logger is the process's structured logger: text on stderr, or JSON when
// IRONFLOW_LOG_FORMAT=json; IRONFLOW_LOG_LEVEL=debug|info|warn|error. It is
// slog's default logger too, so that packages that log through
// slog.Default() (the BMC drivers) write in the same format and level.
func logger() *slog.Logger { return installLogger(os.Stderr) }

// installLogger builds the logger writing to w and makes it slog's default.
func installLogger(w io.Writer) *slog.Logger {
	level := slog.LevelInfo
	_ = level.UnmarshalText([]byte(os.Getenv("IRONFLOW_LOG_LEVEL")))
	opts := &slog.HandlerOptions{Level: level}
	var l *slog.Logger
	if os.Getenv("IRONFLOW_LOG_FORMAT") == "json" {
		l = slog.New(slog.NewJSONHandler(w, opts))
	} else {
		l = slog.New(slog.NewTextHandler(w, opts))
	}
	slog.SetDefault(l)
	return l
}
