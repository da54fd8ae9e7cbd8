package vbmc

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

// DefaultListen is where `ironflow vbmc serve` listens unless told otherwise.
const DefaultListen = "127.0.0.1:8000"

// DefaultIPMIListen is where `ironflow vbmc ipmi-sim` listens unless told otherwise.
const DefaultIPMIListen = "127.0.0.1:6230"

// shutdownTimeout bounds the HTTP server's graceful shutdown.
const shutdownTimeout = 10 * time.Second

const usage = `usage:
  ironflow vbmc serve --config vms.json [--listen 127.0.0.1:8000]
  ironflow vbmc ipmi-sim --config vms.json --vm NAME [--listen 127.0.0.1:6230] [--user U --password P]
  ironflow vbmc chassis-control --config vms.json --vm NAME get|set ARGS...   (run by ipmi_sim)
`

// Main is `ironflow vbmc ...`: args are what follows "vbmc".
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("vbmc: missing subcommand")
	}
	switch args[0] {
	case "serve":
		return mainServe(ctx, args[1:], stderr)
	case "ipmi-sim":
		return mainIPMISim(ctx, args[1:], stderr)
	case "chassis-control":
		return mainChassisControl(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("vbmc: unknown subcommand %q", args[0])
	}
}

func newFlagSet(name string, stderr io.Writer) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet("ironflow vbmc "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs, fs.String("config", "", "vbmc configuration file (JSON)")
}

func loadFlagConfig(path string) (Config, error) {
	if path == "" {
		return Config{}, errors.New("--config is required")
	}
	return LoadConfig(path)
}

func mainServe(ctx context.Context, args []string, stderr io.Writer) error {
	fs, configPath := newFlagSet("serve", stderr)
	listen := fs.String("listen", DefaultListen, "address of the Redfish service (HTTP)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := loadFlagConfig(*configPath)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil)).With("component", "vbmc")
	srv, err := NewServer(cfg, log)
	if err != nil {
		return err
	}
	defer func() {
		if err := srv.Close(); err != nil {
			log.Error("stop VMs", "err", err)
		}
	}()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("vbmc listen on %s: %w", *listen, err)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 30 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	log.Info("redfish service listening", "addr", ln.Addr().String(), "vms", len(cfg.VMs))
	select {
	case err := <-errc:
		return fmt.Errorf("vbmc serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	_ = hs.Shutdown(sctx)
	return nil
}

func mainIPMISim(ctx context.Context, args []string, stderr io.Writer) error {
	fs, configPath := newFlagSet("ipmi-sim", stderr)
	vm := fs.String("vm", "", "VM this BMC controls")
	listen := fs.String("listen", DefaultIPMIListen, "IPMI LAN address (UDP)")
	user := fs.String("user", "", "IPMI user (default: the config's username)")
	password := fs.String("password", "", "IPMI password (default: the config's password)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := loadFlagConfig(*configPath)
	if err != nil {
		return err
	}
	if *user == "" {
		*user = cfg.Username
	}
	if *password == "" {
		*password = cfg.Password
	}
	log := slog.New(slog.NewTextHandler(stderr, nil)).With("component", "vbmc", "vm", *vm)
	stop, err := StartIPMISim(ctx, cfg, *vm, *listen, *user, *password, nil)
	if err != nil {
		return err
	}
	log.Info("ipmi_sim listening", "addr", *listen, "user", *user)
	<-ctx.Done()
	log.Info("stopping ipmi_sim and the VM")
	return stop()
}

func mainChassisControl(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, configPath := newFlagSet("chassis-control", stderr)
	vm := fs.String("vm", "", "VM to control")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := loadFlagConfig(*configPath)
	if err != nil {
		return err
	}
	// stdout belongs to ipmi_sim (it parses get answers): logs go to a file
	// in the VM's state directory.
	var logw io.Writer = io.Discard
	logPath := filepath.Join(cfg.StateDir, *vm, "chassis-control.log")
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err == nil {
		if f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
			defer f.Close()
			logw = f
		}
	}
	log := slog.New(slog.NewTextHandler(logw, nil)).With("component", "vbmc")
	// A power action cut in half (QEMU launched, not yet on record) would
	// leave a VM nobody stops: once started, the call runs to its end,
	// bounded by DefaultChassisControlTimeout, whatever signal ipmi_sim's
	// shutdown sends its children.
	signal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	if err := ChassisControl(context.WithoutCancel(ctx), cfg, *vm, fs.Args(), stdout, log); err != nil {
		log.Error("chassis control", "args", fs.Args(), "err", err)
		return err
	}
	return nil
}
