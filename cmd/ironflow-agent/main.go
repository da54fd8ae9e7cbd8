// Command ironflow-agent is ironflow's ramdisk agent. As PID 1 of the
// ramdisk (/init) it mounts the kernel filesystems, loads the kernel modules
// for the hardware present, waits for entropy, brings the network up (with
// the network_data on the virtual media it booted from, else with DHCP),
// then runs the IPA-compatible agent configured from the kernel
// command line:
//
//	ipa-api-url=http://10.0.0.1:6385   ironflow API (required)
//	ipa-agent-token=...                pre-generated token (virtual media)
//	ipa-node-uuid=...                  node UUID for lookup (virtual media)
//	ipa-insecure=1                     plain HTTP command API (labs)
//	ipa-heartbeat-interval=10          seconds, overrides the derived interval
//	ipa-min-disk-size=1G               smallest root disk without hints
//	ipa-listen-port=9999               command API port
//	ipa-debug=1                        debug logs
//	BOOTIF=01-52-54-00-12-34-56        the boot NIC (PXE), preferred for the default route
//	ipa-collect-lldp=1                 listen for LLDP on every interface for the inventory
//	ipa-lldp-timeout=30                seconds to listen for LLDP (from boot)
//
// Outside a ramdisk the same keys are read from flags (-ipa-api-url ...) for
// debugging on a spare machine; it then touches only disks it is told about
// by hints, and never mounts or loads anything.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ironflow/ironflow/agent"
	"github.com/ironflow/ironflow/agent/boot"
	"github.com/ironflow/ironflow/shadow"
)

func main() {
	ring := &logRing{max: 1 << 20}
	pid1 := os.Getpid() == 1
	opts := map[string]string{}
	if pid1 {
		if err := boot.MountBasics(); err != nil {
			fmt.Fprintln(os.Stderr, "ironflow-agent: mount:", err)
		}
		opts = boot.Cmdline()
	} else {
		for _, k := range []string{"ipa-api-url", "ipa-agent-token", "ipa-node-uuid", "ipa-insecure", "ipa-heartbeat-interval", "ipa-min-disk-size", "ipa-listen-port", "ipa-debug", "BOOTIF", "ipa-macs", "ipa-collect-lldp", "ipa-lldp-timeout"} {
			flag.Func(k, "same as the kernel command line key", func(v string) error { opts[k] = v; return nil })
		}
		flag.Parse()
	}
	level := slog.LevelInfo
	if isTrue(opts["ipa-debug"]) {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(teeWriter{os.Stderr, ring}, &slog.HandlerOptions{Level: level}))
	slog.SetDefault(log)
	err := run(log, pid1, opts, ring)
	log.Error("ironflow-agent stopped", "err", err)
	if pid1 {
		// PID 1 must not exit (the kernel would panic and hide the message).
		for {
			time.Sleep(time.Hour)
		}
	}
	os.Exit(1)
}

func run(log *slog.Logger, pid1 bool, opts map[string]string, ring *logRing) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log.Info("ironflow-agent starting", "version", agent.Version, "pid1", pid1, "kernel", boot.KernelRelease())
	apiURL := opts["ipa-api-url"]
	if apiURL == "" {
		return fmt.Errorf("no ipa-api-url on the kernel command line")
	}
	bootMAC := ""
	if b := opts["BOOTIF"]; len(b) > 3 {
		// PXELINUX/iPXE form: 01-aa-bb-cc-dd-ee-ff (01 = Ethernet).
		bootMAC = strings.ReplaceAll(strings.TrimPrefix(b, "01-"), "-", ":")
	}
	if pid1 {
		if err := boot.LoadModules(log); err != nil {
			log.Warn("some kernel modules failed to load", "err", err)
		}
		boot.WaitForEntropy(log)
		nd := networkData(ctx, opts, log)
		for {
			bringUp := func() error { _, err := boot.BringUpNetwork(ctx, bootMAC, boot.FamiliesFor(apiURL), log); return err }
			if nd != nil {
				bringUp = func() error { _, err := boot.ApplyNetworkData(ctx, nd, log); return err }
			}
			if err := bringUp(); err != nil {
				log.Error("network not up, retrying", "err", err)
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(5 * time.Second):
				}
				continue
			}
			break
		}
	}
	macs := boot.MACs()
	if m := opts["ipa-macs"]; m != "" {
		macs = strings.Split(m, ",")
	}
	hw := &agent.LinuxHardware{Logs: func() map[string][]byte { return map[string][]byte{"ironflow-agent.log": ring.bytes()} },
		AccountRoot: accountRoot(pid1), BootIF: opts["BOOTIF"]}
	if isTrue(opts["ipa-collect-lldp"]) {
		timeout := agent.DefaultLLDPTimeout
		if v := opts["ipa-lldp-timeout"]; v != "" {
			s, err := strconv.ParseFloat(v, 64)
			if err != nil || s <= 0 {
				return fmt.Errorf("ipa-lldp-timeout=%q: want a number of seconds", v)
			}
			timeout = time.Duration(s * float64(time.Second))
		}
		ifaces := boot.Interfaces()
		log.Info("listening for LLDP", "interfaces", ifaces, "timeout", timeout)
		hw.LLDP = agent.NewLLDPCollector(ctx, ifaces, timeout, agent.ListenLLDP)
	}
	cfg := agent.Config{
		APIURL:          apiURL,
		LookupAddresses: macs,
		NodeUUID:        opts["ipa-node-uuid"],
		AgentToken:      opts["ipa-agent-token"],
		Insecure:        isTrue(opts["ipa-insecure"]),
		Hardware:        hw,
		Logger:          log,
	}
	if p := opts["ipa-listen-port"]; p != "" {
		cfg.ListenAddr = ":" + p
	}
	if v := opts["ipa-heartbeat-interval"]; v != "" {
		s, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("ipa-heartbeat-interval=%q: %w", v, err)
		}
		cfg.HeartbeatInterval = time.Duration(s * float64(time.Second))
	}
	if v := opts["ipa-min-disk-size"]; v != "" {
		n, err := parseSize(v)
		if err != nil {
			return fmt.Errorf("ipa-min-disk-size=%q: %w", v, err)
		}
		cfg.MinRootDiskSize = n
	}
	// Custom deploy steps (docs/bmcs-and-boot.md, "custom-agent"): the
	// executables the image put in agent.DefaultCustomStepsDir.
	custom, err := agent.CustomStepsFromDir(agent.DefaultCustomStepsDir)
	if err != nil {
		log.Warn("custom deploy steps not loaded", "err", err)
	}
	cfg.CustomDeploySteps = custom
	a, err := agent.New(cfg)
	if err != nil {
		return err
	}
	if err := a.Run(ctx); err != nil || !(a.Rescued() || a.LockedDown()) {
		return err
	}
	if a.LockedDown() {
		// system.lockdown (a node with disable_power_off): the agent is
		// gone and the machine stays on until the BMC resets it.
		fmt.Fprintln(os.Stderr, "IRONFLOW-LOCKDOWN agent=stopped")
		<-ctx.Done()
		return ctx.Err()
	}
	// Rescue mode, as IPA's: the agent is gone, the machine stays up with
	// its rescue user. The marker is what operators (and the VM tests)
	// look for on the console.
	line, _ := shadow.Entry(accountRoot(pid1), "shadow", agent.RescueUser.Name)
	scheme := "none"
	if strings.HasPrefix(strings.TrimPrefix(line, agent.RescueUser.Name+":"), shadow.Prefix) {
		scheme = "sha512-crypt"
	}
	fmt.Fprintf(os.Stderr, "IRONFLOW-RESCUE user=%s password=%s agent=stopped\n", agent.RescueUser.Name, scheme)
	<-ctx.Done()
	return ctx.Err()
}

// networkData is the node's network_data from the virtual media the agent
// booted from (an ISO with a pre-generated token), nil when there is none
// and the network is configured with DHCP. As Ironic's agent, a node on a
// network without DHCP gets its static configuration this way, before
// lookup (docs/bmcs-and-boot.md, "Virtual media without DHCP").
func networkData(ctx context.Context, opts map[string]string, log *slog.Logger) *boot.NetworkData {
	wait := time.Duration(0)
	if opts["ipa-agent-token"] != "" {
		wait = boot.CDWait // booted from an ISO: its drive is there, maybe not yet scanned
	}
	b, err := boot.ReadNetworkData(ctx, wait, log)
	if err != nil || b == nil {
		return nil
	}
	nd, err := boot.ParseNetworkData(b)
	if err != nil {
		log.Error("network_data on virtual media is unreadable, using DHCP", "err", err)
		return nil
	}
	return nd
}

// accountRoot is where the rescue user is written: the ramdisk's own root,
// never the accounts of a machine the agent is debugged on.
func accountRoot(pid1 bool) string {
	if pid1 {
		return "/"
	}
	return ""
}

func isTrue(s string) bool {
	switch strings.ToLower(s) {
	case "1", "true", "yes", "on":
		return true
	}
	return false
}

// parseSize accepts bytes with an optional K/M/G/T suffix (powers of 1024).
func parseSize(s string) (int64, error) {
	mult := int64(1)
	switch strings.ToUpper(s[len(s)-1:]) {
	case "K":
		mult = 1 << 10
	case "M":
		mult = 1 << 20
	case "G":
		mult = 1 << 30
	case "T":
		mult = 1 << 40
	}
	if mult > 1 {
		s = s[:len(s)-1]
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n * mult, err
}

// logRing keeps the last max bytes of the agent's log for
// log.collect_system_logs.
type logRing struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (r *logRing) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf = append(r.buf, p...)
	if len(r.buf) > r.max {
		r.buf = append([]byte(nil), r.buf[len(r.buf)-r.max:]...)
	}
	return len(p), nil
}

func (r *logRing) bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]byte(nil), r.buf...)
}

type teeWriter struct {
	a, b interface{ Write([]byte) (int, error) }
}

func (t teeWriter) Write(p []byte) (int, error) {
	t.b.Write(p)
	return t.a.Write(p)
}
