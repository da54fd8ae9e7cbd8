package tests

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"testing"
	"time"

	"github.com/ironflow/ironflow/agent/sim"
	"github.com/ironflow/ironflow/embedded"
)

// TestTemporalClusterSeparateServices runs ironflow on Temporal's
// frontend, history, matching and worker services as four processes with
// mutual internode TLS (docs/production.md): the services' gRPC ports
// refuse a peer without a certificate of the cluster's CA, and a deploy
// driven by the baremetal CLI survives the history process killed -9
// twice (waiting for the agent, then while the agent writes the image) and
// restarted, the other processes running on.
func TestTemporalClusterSeparateServices(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal cluster")
	}
	start := time.Now()
	l := startClusterLabWith(t, true)

	pids := map[int]string{}
	for _, svc := range embedded.TemporalServices {
		pid := l.temporal.ServicePID(svc)
		if pid == 0 {
			t.Fatalf("no process runs %s", svc)
		}
		if other, ok := pids[pid]; ok {
			t.Fatalf("%s and %s share process %d", svc, other, pid)
		}
		pids[pid] = svc
	}

	t.Run("internode gRPC is mutual TLS", func(t *testing.T) {
		c := l.temporal.Certs()
		pemCA, err := os.ReadFile(c.CAFile)
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pemCA)
		node, err := tls.LoadX509KeyPair(c.InternodeCertFile, c.InternodeKey)
		if err != nil {
			t.Fatal(err)
		}
		for _, svc := range []string{"history", "matching"} {
			addr := l.temporal.ServiceAddress(svc)
			// Without a client certificate: the server's certificate
			// verifies under the CA, and the server then refuses us.
			conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: c.ServerName, NextProtos: []string{"h2"}})
			if err == nil {
				_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
				_, err = conn.Read(make([]byte, 1))
				conn.Close()
			}
			if err == nil {
				t.Errorf("%s (%s) accepted a peer without a client certificate", svc, addr)
			} else {
				t.Logf("%s without a client certificate: %v", svc, err)
			}
			// With the internode certificate: accepted (the server
			// speaks first in HTTP/2: its SETTINGS frame arrives).
			conn, err = tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: c.ServerName, Certificates: []tls.Certificate{node}, NextProtos: []string{"h2"}})
			if err != nil {
				t.Fatalf("%s refused the internode certificate: %v", svc, err)
			}
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := conn.Read(make([]byte, 1)); err != nil {
				t.Errorf("%s with the internode certificate: %v", svc, err)
			}
			conn.Close()
			// Without the cluster's CA the server's certificate does not verify.
			if _, err := tls.Dial("tcp", addr, &tls.Config{ServerName: c.ServerName}); err == nil {
				t.Errorf("%s's certificate verified without the cluster's CA", svc)
			}
		}
	})

	t.Run("deploy survives the history process killed mid-deploy", func(t *testing.T) {
		img := newImageServer(t, 8<<20)
		img.delay = 300 * time.Millisecond
		mac := "52:54:00:cc:05:21"
		n := l.deployToCallback(t, "split-cluster-node-0", mac, img)

		others := map[string]int{}
		for _, svc := range []string{"frontend", "matching", "worker"} {
			others[svc] = l.temporal.ServicePID(svc)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		killHistory := func() {
			t.Helper()
			l.temporal.KillService("history")
			if l.temporal.ServicePID("history") != 0 {
				t.Fatal("history still running after its kill")
			}
			time.Sleep(time.Second)
			if err := l.temporal.Restart(ctx); err != nil {
				t.Fatal(err)
			}
		}
		killHistory()
		if _, err := sim.Start(ctx, sim.Config{APIURL: l.api2URL, MACs: []string{mac}, HeartbeatInterval: time.Second}); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(90 * time.Second)
		for img.downloads.Load() == 0 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if img.downloads.Load() == 0 {
			t.Fatalf("write_image never started\n%s\nhistory:\n%s", l.worker.Tail(4000), embedded.Tail(l.temporal.ServiceLogFile("history"), 3000))
		}
		killHistory()
		l.waitState(t, n.UUID, "active", 3*time.Minute)
		if got := img.downloads.Load(); got != 1 {
			t.Errorf("image written %d times across the kills, want 1", got)
		}
		for svc, pid := range others {
			if got := l.temporal.ServicePID(svc); got != pid {
				t.Errorf("%s process changed from %d to %d: only history was to restart", svc, pid, got)
			}
		}
	})
	t.Logf("whole test %s", time.Since(start).Round(time.Second))
}
