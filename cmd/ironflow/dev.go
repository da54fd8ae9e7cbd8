package main

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/ironflow/ironflow/apiserver"
	"github.com/ironflow/ironflow/embedded"
	"github.com/ironflow/ironflow/signature"
)

// devFlags are ironflow dev's settings: the API's, the worker's (sharing
// the API's database, Temporal and keys), the boot services' and the
// embedded parts'.
type devFlags struct {
	dataDir, temporalKind, temporalServices *string
	temporalPort, uiPort                    *int
	api                                     apiFlags
	wf                                      workerFlags
	boot                                    bootFlags
	codec                                   codecServerFlags
}

// devSettings builds ironflow dev's flags.
func devSettings() (*settings, devFlags) {
	s := newSettings("dev")
	var d devFlags
	d.dataDir = s.String("data-dir", ".data", "where the embedded PostgreSQL, Temporal and boot files live")
	d.api = addAPIFlags(s)
	d.wf = addWorkerFlags(s, &d.api)
	d.boot = addBootFlags(s)
	d.boot.glance = d.wf.glance
	d.temporalPort = s.Int("temporal-port", 7233, "embedded Temporal frontend port")
	d.uiPort = s.Int("temporal-ui-port", 8233, "embedded Temporal Web UI port (-1: headless)")
	d.temporalKind = s.String("temporal", "dev", "embedded Temporal: dev (the Temporal CLI's dev server) or cluster (the server built from go.temporal.io/server on the embedded PostgreSQL, mTLS; make tools builds it)")
	d.temporalServices = s.String("temporal-services", "all", "with --temporal cluster: all (one server process) or split (frontend, history, matching and worker as four processes, mutual internode TLS; docs/production.md)")
	d.codec = addCodecServerFlags(s, "codec-listen")
	d.codec.namespace, d.codec.payload = d.api.namespace, d.api.payload
	return s, d
}

// runDev starts the whole service on embedded defaults: a throwaway
// PostgreSQL cluster and the Temporal dev server under the data directory
// (unless DATABASE_URL / TEMPORAL_ADDRESS point elsewhere), migrations, the
// API, a worker and the PXE HTTP service. Ctrl-C stops every part; a second
// run reuses the data directory, so workflows and nodes survive.
func runDev(ctx context.Context, args []string) error {
	s, d := devSettings()
	dataDir, api, wf, boot, codecFlags := d.dataDir, d.api, d.wf, d.boot, d.codec
	temporalPort, uiPort, temporalKind, temporalServices := d.temporalPort, d.uiPort, d.temporalKind, d.temporalServices
	if err := s.parse(args); err != nil {
		return err
	}
	explicit := map[string]bool{}
	s.fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	if *api.signal.value == "" && *api.signal.file == "" {
		// One process holds both ends: a key made now signs and verifies
		// every heartbeat of this run (the worker shares api.signal).
		*api.signal.value = string(signature.Generate())
	}
	log := logger()

	abs, err := filepath.Abs(*dataDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return fmt.Errorf("create data directory %s: %w", abs, err)
	}
	if err := devPayloadKey(api.payload, abs); err != nil {
		return err
	}
	codec, err := api.payload.codec()
	if err != nil {
		return err
	}
	// The codec server shares the API's operators: its htpasswd file or
	// Keystone, or, like the dev API's noauth, none on loopback.
	codecAuthn, err := codecAuth(*api.auth, *api.htpasswd, api.keystone.config(), *codecFlags.listen, *api.auth == apiserver.AuthNoAuth)
	if err != nil {
		return err
	}

	// PostgreSQL: DATABASE_URL, or a cluster under .data/pg.
	var pg *embedded.Postgres
	if *api.databaseURL == "" {
		if pg, err = embedded.StartPostgres(ctx, filepath.Join(abs, "pg"), log.With("component", "postgres")); err != nil {
			return err
		}
		defer pg.Stop()
		*api.databaseURL = pg.URL()
	}
	embeddedTemporal := !explicit["temporal-address"] && os.Getenv("TEMPORAL_ADDRESS") == "" && os.Getenv(envName("temporal-address")) == ""
	stopCluster, uiURL, err := devTemporalCluster(ctx, *temporalKind, *temporalServices, embeddedTemporal, pg, abs, *temporalPort, *uiPort, "http://"+*codecFlags.listen, api, log)
	if err != nil {
		return err
	}
	defer stopCluster()

	// Temporal: TEMPORAL_ADDRESS, or the dev server with its SQLite file
	// under .data so that workflows survive a restart.
	if embeddedTemporal && *temporalKind == "dev" {
		t, err := embedded.StartTemporal(ctx, embedded.TemporalConfig{
			DBFile:           filepath.Join(abs, "temporal", "temporal.db"),
			Port:             *temporalPort,
			UIPort:           *uiPort,
			Namespace:        *api.namespace,
			LogFile:          filepath.Join(abs, "temporal", "server.log"),
			SearchAttributes: embedded.WorkflowSearchAttributes(),
			UICodecEndpoint:  "http://" + *codecFlags.listen,
		}, log.With("component", "temporal"))
		if err != nil {
			return err
		}
		defer t.Stop()
		*api.temporal = t.Address()
		uiURL = t.UIURL()
	}
	if !explicit["codec-cors-origins"] && uiURL != "" {
		*codecFlags.origins = uiURL + "," + strings.Replace(uiURL, "127.0.0.1", "localhost", 1)
	}

	st, err := openStore(ctx, *api.databaseURL, true)
	if err != nil {
		return err
	}
	defer st.Close()
	metricsAddr, err := serveMetrics(ctx, *api.metricsListen, st, log)
	if err != nil {
		return err
	}
	stopTracing, err := startTracing(*api.otelEndpoint, "ironflow-dev", log)
	if err != nil {
		return err
	}
	defer stopTracing()
	tc, err := dialTemporal(*api.temporal, *api.namespace, api.temporalTLS, codec, log)
	if err != nil {
		return err
	}
	defer tc.Close()

	bootAddr, bootDone, vm, err := startBoot(ctx, boot, abs, st, log)
	if err != nil {
		return err
	}
	stopWorker, err := startWorker(st, tc, wf, vm, log)
	if err != nil {
		return err
	}
	defer stopWorker()
	apiCfg := api.config()
	if err := wf.glance.setAPI(&apiCfg); err != nil {
		return err
	}
	keys, err := api.signal.load()
	if err != nil {
		return err
	}
	apiCfg.SignalKey = keys.Current
	apiAddr, apiDone, err := startAPI(ctx, apiCfg, api.serving(), st, tc, log)
	if err != nil {
		return err
	}
	// A taken codec port costs the Web UI its decoding, not the run.
	codecURL := ""
	codecAddr, codecDone, err := startCodecServer(ctx, codecFlags, codec, codecAuthn, log)
	if err != nil {
		log.Warn("codec server not started: the Web UI shows payloads encrypted", "error", err)
		codecDone = nil
	} else {
		codecURL = "http://" + codecAddr
	}

	fmt.Printf(`
ironflow is running (data in %s)
  API          %s://%s
               export OS_ENDPOINT=%s://%s OS_AUTH_TYPE=none; baremetal node list
  Temporal     %s (namespace %s)
  Web UI       %s
  Codec server %s (payloads decrypted for the Web UI; key in %s)
  PostgreSQL   %s
  Boot HTTP    %s://%s
  Metrics      %s (Prometheus; docs/metrics.md)
Press Ctrl-C to stop.
`, abs, api.tls.scheme(), apiAddr, api.tls.scheme(), apiAddr, *api.temporal, *api.namespace, orDash(uiURL), orDash(codecURL), orDash(*api.payload.file), redactDSN(*api.databaseURL), boot.tls.scheme(), bootAddr, orDash(metricsURL(metricsAddr)))

	select {
	case <-ctx.Done():
		log.Info("stopping")
		return nil
	case err := <-apiDone:
		return fmt.Errorf("api stopped: %v", err)
	case err := <-bootDone:
		return fmt.Errorf("boot service stopped: %v", err)
	case err := <-codecDone:
		return fmt.Errorf("codec server stopped: %v", err)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// redactDSN hides a password in a database URL for display.
func redactDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		return dsn
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "******")
	}
	return u.String()
}
