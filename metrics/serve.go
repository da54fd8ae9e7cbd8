package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler serves Registry in Prometheus's text format (and OpenMetrics to
// a scraper that asks for it).
func Handler() http.Handler {
	return promhttp.HandlerFor(Registry, promhttp.HandlerOpts{
		ErrorLog:          slogErrors{},
		Registry:          Registry,
		EnableOpenMetrics: true,
	})
}

// Serve serves Handler at /metrics on addr until ctx ends; an empty addr
// serves nothing. It fails at once when the address is taken, naming the
// flag that moves it: a process whose metrics nobody can scrape is a fleet
// nobody sees, so ironflow does not start without them when asked for them.
func Serve(ctx context.Context, addr string, log *slog.Logger) (string, error) {
	if addr == "" {
		return "", nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return "", fmt.Errorf("metrics: listen on %s: the address is already in use (another ironflow process on this machine?): set --metrics-listen to a free host:port, or to an empty string to serve no metrics", addr)
		}
		return "", fmt.Errorf("metrics: listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", Handler())
	mux.Handle(SensorsPath, SensorsHandler()) // sensors.go: empty unless the worker polls sensors
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "ironflow metrics: /metrics, "+SensorsPath)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: time.Minute}
	go func() { _ = srv.Serve(l) }()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if log != nil {
		log.Info("metrics listening", "address", l.Addr().String(), "path", "/metrics")
	}
	return l.Addr().String(), nil
}

// slogErrors logs promhttp's errors (a collector that failed) through slog.
type slogErrors struct{}

func (slogErrors) Println(v ...any) { slog.Warn("metrics: " + fmt.Sprint(v...)) }
