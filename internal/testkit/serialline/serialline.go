// Package serialline is a machine's serial port on TCP for tests, as
// QEMU's socket chardev serves one (-chardev socket,server=on), and an IPMI
// BMC whose serial over LAN reaches it: a console on real parts when no VM
// is needed.
package serialline

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/embedded"
	"github.com/ironflow/ironflow/vbmc"
)

// Start serves a serial line on loopback until the test ends and answers
// its host:port. It prints bootText again and again, as a machine that
// keeps booting, and echoes what it reads upper-cased, so that a test sees
// both directions.
func Start(t testing.TB, bootText string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serve(c, bootText)
		}
	}()
	return ln.Addr().String()
}

func serve(c net.Conn, bootText string) {
	defer c.Close()
	go func() {
		for {
			if _, err := io.WriteString(c, bootText); err != nil {
				return
			}
			time.Sleep(300 * time.Millisecond)
		}
	}()
	buf := make([]byte, 256)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return
		}
		if _, err := c.Write([]byte(strings.ToUpper(string(buf[:n])))); err != nil {
			return
		}
	}
}

// BMC starts a serial line printing bootText and OpenIPMI's ipmi_sim (user
// admin, password "password") whose serial over LAN reaches it, through
// vbmc's serial_address; both end with the test. It answers ipmi_sim's UDP port
// on 127.0.0.1.
func BMC(t testing.TB, bootText string) int {
	t.Helper()
	dir := t.TempDir()
	cfg, _ := json.Marshal(map[string]any{"state_dir": filepath.Join(dir, "state"), "username": "admin", "password": "password",
		"vms": []map[string]any{{"name": "sol0", "mac": "52:54:00:dd:00:09", "netdev": "none", "serial_address": Start(t, bootText)}}})
	path := filepath.Join(dir, "vms.json")
	if err := os.WriteFile(path, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	vc, err := vbmc.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	port, err := embedded.FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	// The chassis control does nothing: no VM is behind this BMC.
	stop, err := vbmc.StartIPMISim(context.Background(), vc, "sol0", "127.0.0.1:"+strconv.Itoa(port), "admin", "password", []string{"true"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	return port
}
