package agent

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync/atomic"
	"time"
)

// burnin_network sends a verified stream between two agents over TCP for
// runtime seconds. IPA pairs nodes through a coordination service (its
// agent_burnin_fio_network_pairing_* options) and runs fio; ironflow
// pairs them explicitly: the operator runs the step with role "reader" on
// one node and role "writer" with partner set to the reader's address on
// the other. Without a role the agent sends to itself over loopback,
// which exercises its network stack but no wire.
const (
	defaultBurninPort = 9998
	netBlock          = 64 << 10
	// netDialWindow is how long a writer keeps trying to reach a reader
	// that has not started yet (or is rebooting).
	netDialWindow = 10 * time.Minute
)

// netBlockFill fills one block of the stream: its sequence number, then
// a pattern derived from it, so the reader verifies order and content.
func netBlockFill(b []byte, seq uint64) {
	binary.LittleEndian.PutUint64(b, seq)
	x := seq*0x9e3779b97f4a7c15 + 1
	for i := 8; i+8 <= len(b); i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		binary.LittleEndian.PutUint64(b[i:], x)
	}
}

type netCounters struct {
	bytes, errs atomic.Int64
}

// netWrite streams blocks to conn until ctx ends.
func netWrite(ctx context.Context, conn net.Conn, c *netCounters) error {
	buf := make([]byte, netBlock)
	w := bufio.NewWriterSize(conn, 4*netBlock)
	for seq := uint64(0); ctx.Err() == nil; seq++ {
		netBlockFill(buf, seq)
		_ = conn.SetWriteDeadline(time.Now().Add(30 * time.Second))
		if _, err := w.Write(buf); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("send: %w", err)
		}
		c.bytes.Add(netBlock)
	}
	return w.Flush()
}

// netRead reads and verifies blocks until ctx ends or the writer closes.
func netRead(ctx context.Context, conn net.Conn, c *netCounters) error {
	go func() { <-ctx.Done(); _ = conn.SetReadDeadline(time.Now()) }()
	got := make([]byte, netBlock)
	want := make([]byte, netBlock)
	r := bufio.NewReaderSize(conn, 4*netBlock)
	for seq := uint64(0); ; seq++ {
		if _, err := io.ReadFull(r, got); err != nil {
			if ctx.Err() != nil || errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("receive: %w", err)
		}
		netBlockFill(want, seq)
		if string(got) != string(want) {
			c.errs.Add(1)
		}
		c.bytes.Add(netBlock)
	}
}

// burninNetwork is burnin_network.
func (a *Agent) burninNetwork(ctx context.Context, cmd *command, args, node map[string]any) (any, error) {
	s := newStepArgs(args, node)
	total := s.seconds("runtime", "", defaultBurninNetwork)
	role := s.str("role", "", "")
	partner := s.str("partner", "", "")
	port := s.integer("port", "", defaultBurninPort)
	cp, err := checkpointArg(args)
	if s.err != nil {
		return nil, s.err
	}
	if err != nil {
		return nil, err
	}
	bad := func(msg string) error {
		return newRESTError("InvalidCommandParamsError", 400, "Invalid command parameters", "burnin_network: "+msg)
	}
	switch {
	case port < 1 || port > 65535:
		return nil, bad("port must be in 1-65535")
	case role == "writer" && partner == "":
		return nil, bad("a writer needs its partner (the reader's address)")
	case role != "" && role != "writer" && role != "reader":
		return nil, bad(fmt.Sprintf("role %q is neither writer nor reader", role))
	}
	clock := resumeClock("burnin_network", total, cp)
	var c netCounters
	c.bytes.Store(int64(cpNumber(cp, "bytes")))
	c.errs.Store(int64(cpNumber(cp, "errors")))
	rctx, cancel := context.WithTimeout(ctx, clock.remaining())
	defer cancel()
	mode := role
	if mode == "" {
		mode = "loopback"
	}
	publish := func() {
		a.publishBurnin(cmd, "burnin_network", "burnin_network: "+mode, clock, clock.fraction(),
			map[string]any{"bytes": float64(c.bytes.Load()), "errors": float64(c.errs.Load())})
	}
	stop := ticker(rctx, progressEvery, publish)
	defer stop()

	listen := func(addr string) (net.Listener, error) {
		var lc net.ListenConfig
		return lc.Listen(rctx, "tcp", addr)
	}
	switch role {
	case "reader":
		ln, err := listen(net.JoinHostPort("", strconv.Itoa(int(port))))
		if err != nil {
			return nil, fmt.Errorf("burnin_network: listen on port %d: %w", port, err)
		}
		err = serveReader(rctx, ln, &c)
		if err != nil {
			return nil, fmt.Errorf("burnin_network: %w", err)
		}
	case "writer":
		if err := dialWriter(rctx, net.JoinHostPort(partner, strconv.Itoa(int(port))), &c); err != nil {
			return nil, fmt.Errorf("burnin_network: %w", err)
		}
	default:
		ln, err := listen("127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("burnin_network: listen on loopback: %w", err)
		}
		var w netCounters
		errc := make(chan error, 1)
		go func() { errc <- serveReader(rctx, ln, &c) }()
		if err := dialWriter(rctx, ln.Addr().String(), &w); err != nil {
			return nil, fmt.Errorf("burnin_network: %w", err)
		}
		if err := <-errc; err != nil {
			return nil, fmt.Errorf("burnin_network: %w", err)
		}
	}
	stop()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	publish()
	res := map[string]any{"role": mode, "bytes": c.bytes.Load(), "errors": c.errs.Load(), "seconds": clock.elapsed().Seconds(),
		"bytes_per_second": float64(c.bytes.Load()) / max(clock.elapsed().Seconds(), 1e-9)}
	a.log.Info("burnin_network finished", "node", a.NodeUUID(), "result", res)
	if c.errs.Load() > 0 {
		return nil, fmt.Errorf("burnin_network: %d blocks received wrong", c.errs.Load())
	}
	return res, nil
}

// serveReader accepts writers one after the other (a writer that reboots
// comes back) and verifies their streams until ctx ends.
func serveReader(ctx context.Context, ln net.Listener, c *netCounters) error {
	go func() { <-ctx.Done(); ln.Close() }()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("accept: %w", err)
		}
		err = netRead(ctx, conn, c)
		conn.Close()
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// dialWriter connects to the reader (retrying while it is not there yet)
// and streams until ctx ends, reconnecting after a dropped connection.
func dialWriter(ctx context.Context, addr string, c *netCounters) error {
	var d net.Dialer
	firstTry := time.Now()
	for ctx.Err() == nil {
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if time.Since(firstTry) > netDialWindow {
				return fmt.Errorf("reach the reader at %s: %w", addr, err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		firstTry = time.Now()
		err = netWrite(ctx, conn, c)
		conn.Close()
		if err == nil {
			return nil
		}
	}
	return nil
}
