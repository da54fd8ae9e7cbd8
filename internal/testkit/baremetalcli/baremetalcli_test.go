package baremetalcli

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

func start(t *testing.T) *Server {
	t.Helper()
	if err := Missing(); err != nil {
		t.Skipf("SKIPPED: %v", err)
	}
	s, err := Start(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// Each run is the CLI's own, with its own arguments, environment and exit
// status: two runs at once, each with its endpoint, reach each its server.
func TestRunsAreTheCLIsOwnWithTheirOwnEnvironment(t *testing.T) {
	s := start(t)
	r, err := s.Run(context.Background(), os.Environ(), "--version")
	if err != nil || r.Exit != 0 || !strings.HasPrefix(r.Stdout, "baremetal ") {
		t.Fatalf("--version: %+v, %v", r, err)
	}
	r, err = s.Run(context.Background(), os.Environ(), "no-such-command")
	if err != nil || r.Exit == 0 || r.Err() == nil {
		t.Fatalf("an unknown command exits 0: %+v, %v", r, err)
	}

	var mu sync.Mutex
	seen := map[string][]string{}
	server := func(name string) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			mu.Lock()
			seen[name] = append(seen[name], req.URL.Path+" "+req.Header.Get("User-Agent"))
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error_message": "{\"faultstring\": \"Node ` + name + ` could not be found.\", \"faultcode\": \"Client\"}"}`))
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	a, b := server("a"), server("b")
	var wg sync.WaitGroup
	results := map[string]Result{}
	for name, srv := range map[string]*httptest.Server{"a": a, "b": b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			env := append(os.Environ(), "OS_ENDPOINT="+srv.URL, "OS_AUTH_TYPE=none")
			r, err := s.Run(context.Background(), env, "--os-baremetal-api-version", "1.1", "node", "show", "n-"+name)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			results[name] = r
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, name := range []string{"a", "b"} {
		r := results[name]
		if r.Exit == 0 || !strings.Contains(r.Stderr, "Node "+name+" could not be found") {
			t.Errorf("run against server %s: exit %d, stderr %q", name, r.Exit, r.Stderr)
		}
		if len(seen[name]) == 0 || !strings.Contains(seen[name][0], "/v1/nodes/n-"+name) || !strings.Contains(seen[name][0], "python-ironicclient") {
			t.Errorf("server %s saw %q, want the CLI's GET of node n-%s", name, seen[name], name)
		}
	}
}

// A cancelled run ends at once, killed, and the server serves the next.
func TestCancelKillsTheRun(t *testing.T) {
	s := start(t)
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		<-req.Context().Done()
	}))
	t.Cleanup(hang.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	env := append(os.Environ(), "OS_ENDPOINT="+hang.URL, "OS_AUTH_TYPE=none")
	start := time.Now()
	_, err := s.Run(ctx, env, "--os-baremetal-api-version", "1.1", "node", "list")
	if err == nil {
		t.Fatal("a run against a server that never answers returned no error")
	}
	if waited := time.Since(start); waited > time.Minute {
		t.Errorf("the cancelled run returned after %v", waited)
	}
	if r, err := s.Run(context.Background(), os.Environ(), "--version"); err != nil || r.Exit != 0 {
		t.Errorf("the next run: %+v, %v", r, err)
	}
}
