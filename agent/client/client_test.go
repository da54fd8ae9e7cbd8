package client

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const tok = "secret-token-0123456789abcdefghijklmnopqrstu"

func TestErrorsAndToken(t *testing.T) {
	var polls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("agent_token") != tok {
			w.WriteHeader(401)
			json.NewEncoder(w).Encode(map[string]any{"type": "Unauthorized", "code": 401, "message": "Unauthorized", "details": "bad token"})
			return
		}
		switch {
		case r.Method == "POST" && strings.Contains(r.URL.RawQuery, "wait=false"):
			w.WriteHeader(409)
			json.NewEncoder(w).Encode(map[string]any{"type": "AgentIsBusy", "code": 409, "message": "Agent is busy", "details": "executing command x"})
		case r.Method == "POST":
			// IPA's older agents send command_error as a bare string.
			w.Write([]byte(`{"id":"1","command_name":"standby.sync","command_status":"FAILED","command_error":"disk on fire","command_result":null}`))
		case r.URL.Path == "/v1/commands/c1":
			if polls.Add(1) < 3 {
				w.Write([]byte(`{"id":"c1","command_name":"deploy.execute_deploy_step","command_status":"RUNNING","command_error":null,"command_result":{"progress":{"bytes_written":5,"total_bytes":10}}}`))
				return
			}
			w.Write([]byte(`{"id":"c1","command_name":"deploy.execute_deploy_step","command_status":"FAILED","command_error":{"type":"ImageChecksumError","code":500,"message":"Error verifying image checksum","details":"expected a got b"},"command_result":null}`))
		}
	}))
	defer srv.Close()
	ctx := context.Background()

	bad, _ := New(srv.URL, "wrong")
	if err := bad.Sync(ctx); !errors.Is(err, ErrUnauthorized) || strings.Contains(err.Error(), "wrong") {
		t.Fatalf("401: %v", err)
	}
	c, _ := New(srv.URL, tok)
	if _, err := c.ExecuteDeployStep(ctx, Step{Step: "write_image"}, nil, nil); !errors.Is(err, ErrAgentBusy) || !strings.Contains(err.Error(), "executing command x") {
		t.Fatalf("409: %v", err)
	}
	err := c.Sync(ctx)
	var cf *CommandFailedError
	if !errors.As(err, &cf) || !errors.Is(err, ErrCommandFailed) || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("failed command: %v", err)
	}
	var seen []Progress
	r, err := c.WaitCommand(ctx, "c1", time.Millisecond, func(r CommandResult) {
		p, _ := r.Progress()
		seen = append(seen, p)
	})
	if !errors.As(err, &cf) || cf.Type != "ImageChecksumError" || !strings.Contains(err.Error(), "expected a got b") || r.CommandStatus != StatusFailed {
		t.Fatalf("wait: %v %+v", err, r)
	}
	if len(seen) != 2 || seen[0].BytesWritten != 5 || seen[0].TotalBytes != 10 {
		t.Fatalf("progress %+v", seen)
	}
	if strings.Contains(err.Error(), tok) {
		t.Fatal("token in error")
	}
}

func TestUnreachable(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	c, _ := New("http://"+addr, tok, WithTimeout(2*time.Second))
	_, err := c.ListCommands(context.Background())
	if !errors.Is(err, ErrUnreachable) || strings.Contains(err.Error(), tok) {
		t.Fatalf("want ErrUnreachable without the token, got %v", err)
	}
	if _, err := New("ftp://x", tok); err == nil {
		t.Fatal("non-http URL accepted")
	}
	if _, err := New("https://x:9999", tok, WithCAPEM([]byte("junk"))); err == nil {
		t.Fatal("junk CA accepted")
	}
}

// TestInventoryLeavesOutUnknownLinkState: the agent reports a link that is
// down as has_carrier false; a BMC's inventory, which cannot know, leaves
// the key out instead of guessing.
func TestInventoryLeavesOutUnknownLinkState(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   Interface
		want string
	}{
		{"agent, link down", Interface{Name: "eth0", MACAddress: "52:54:00:00:00:01", HasCarrier: new(false)}, `{"name":"eth0","mac_address":"52:54:00:00:00:01","has_carrier":false}`},
		{"BMC, link unknown", Interface{Name: "NIC.1", MACAddress: "52:54:00:00:00:01"}, `{"name":"NIC.1","mac_address":"52:54:00:00:00:01"}`},
	} {
		b, err := json.Marshal(tc.in)
		if err != nil || string(b) != tc.want {
			t.Errorf("%s: %s, %v; want %s", tc.name, b, err, tc.want)
		}
	}
}
