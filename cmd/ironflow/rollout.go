package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ironflow/ironflow/apiserver"
)

// The ironflow rollout CLI: the rollout API (docs/rollouts.md) from a
// shell, with live progress. It speaks to the API as any client does
// (noauth, HTTP basic or a Keystone token) and prints the API's own error
// messages.

const rolloutUsage = `usage: ironflow rollout [flags] <command> [args]

commands:
  create <file|->     start the rollout the JSON spec describes (POST /ironflow/v1/rollouts)
  list                the rollouts, newest first
  show <uuid>         a rollout's state, its waves and its nodes (--watch: live until it ends)
  pause <uuid>        nothing more starts; running operations finish
  resume <uuid>       undo pause
  approve <uuid>      let the next wave start when it waits for approval
  abort <uuid>        nothing more starts; the rollout ends aborted`

// rolloutClient is one API endpoint and its credentials.
type rolloutClient struct {
	base           string
	user, password string
	token          string
	http           *http.Client
	out            io.Writer
	json           bool
	watch          bool
	interval       time.Duration
}

// rolloutFlags are ironflow rollout's settings.
type rolloutFlags struct {
	api, user, password, token, cacert *string
	asJSON, watch                      *bool
	interval                           *time.Duration
}

// rolloutSettings builds ironflow rollout's flags.
func rolloutSettings() (*settings, rolloutFlags) {
	s := newSettings("rollout")
	return s, rolloutFlags{
		api:      s.String("api-url", "http://127.0.0.1:6385", "the ironflow API (rollout)", "IRONFLOW_API_URL"),
		user:     s.String("username", "", "the user for the API's http_basic auth strategy", "IRONFLOW_API_USERNAME"),
		password: s.String("password", "", "the password for the API's http_basic auth strategy (prefer the environment variable)", "IRONFLOW_API_PASSWORD"),
		token:    s.String("token", "", "a Keystone token, for the API's keystone auth strategy", "OS_TOKEN"),
		cacert:   s.String("cacert", "", "a PEM CA bundle the API's certificate is checked against (default: the system's)"),
		asJSON:   s.Bool("json", false, "print the API's JSON instead of tables"),
		watch:    s.Bool("watch", false, "rollout show: print progress until the rollout ends"),
		interval: s.Duration("interval", 2*time.Second, "rollout show --watch: time between two reads"),
	}
}

func runRollout(ctx context.Context, args []string) error {
	s, f := rolloutSettings()
	api, user, password, token, cacert, asJSON, watch, interval := f.api, f.user, f.password, f.token, f.cacert, f.asJSON, f.watch, f.interval
	if err := s.parse(args); err != nil {
		return err
	}
	rest := s.fs.Args()
	if len(rest) == 0 {
		return errors.New(rolloutUsage)
	}
	// Flags may follow the command too (ironflow rollout show --watch <uuid>).
	cmd := rest[0]
	if err := s.parse(rest[1:]); err != nil {
		return err
	}
	rest = append([]string{cmd}, s.fs.Args()...)
	hc := &http.Client{Timeout: 60 * time.Second}
	if *cacert != "" {
		pem, err := os.ReadFile(*cacert)
		if err != nil {
			return fmt.Errorf("--cacert: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("--cacert %s: no PEM certificate in it", *cacert)
		}
		hc.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	}
	if *interval <= 0 {
		return fmt.Errorf("--interval %s: want a positive duration", *interval)
	}
	c := &rolloutClient{base: strings.TrimRight(*api, "/") + "/ironflow/v1/rollouts", user: *user, password: *password, token: *token,
		http: hc, out: os.Stdout, json: *asJSON, watch: *watch, interval: *interval}
	return c.run(ctx, rest[0], rest[1:])
}

func (c *rolloutClient) run(ctx context.Context, cmd string, args []string) error {
	one := func() (string, error) {
		if len(args) != 1 {
			return "", fmt.Errorf("usage: ironflow rollout %s <uuid>", cmd)
		}
		return args[0], nil
	}
	switch cmd {
	case "create":
		if len(args) != 1 {
			return errors.New("usage: ironflow rollout create <file|->")
		}
		return c.create(ctx, args[0])
	case "list":
		if len(args) != 0 {
			return errors.New("usage: ironflow rollout list")
		}
		return c.list(ctx)
	case "show":
		id, err := one()
		if err != nil {
			return err
		}
		return c.show(ctx, id)
	case "pause", "resume", "approve", "abort":
		id, err := one()
		if err != nil {
			return err
		}
		if _, err := c.do(ctx, "POST", "/"+id+"/"+cmd, nil); err != nil {
			return err
		}
		fmt.Fprintf(c.out, "rollout %s: %s sent\n", id, cmd)
		return nil
	}
	return fmt.Errorf("unknown command %q\n%s", cmd, rolloutUsage)
}

// do calls the API and answers the body of a 2xx answer; any other is an
// error with the API's message (Ironic's error body).
func (c *rolloutClient) do(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.user != "" || c.password != "" {
		req.SetBasicAuth(c.user, c.password)
	}
	if c.token != "" {
		req.Header.Set("X-Auth-Token", c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("the ironflow API at %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("%s %s: %s: %s", method, c.base+path, resp.Status, apiserver.FaultString(b))
	}
	return b, nil
}

func (c *rolloutClient) create(ctx context.Context, file string) error {
	var spec []byte
	var err error
	if file == "-" {
		spec, err = io.ReadAll(os.Stdin)
	} else {
		spec, err = os.ReadFile(file)
	}
	if err != nil {
		return err
	}
	if !json.Valid(spec) {
		return fmt.Errorf("%s: not JSON: a rollout spec is the body of POST /ironflow/v1/rollouts (docs/rollouts.md)", file)
	}
	b, err := c.do(ctx, "POST", "", spec)
	if err != nil {
		return err
	}
	if c.json {
		_, err := c.out.Write(append(b, '\n'))
		return err
	}
	var r struct {
		UUID  string `json:"uuid"`
		State string `json:"state"`
		Spec  struct {
			Selector struct {
				Nodes []string `json:"nodes"`
			} `json:"selector"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("the API's answer: %w", err)
	}
	fmt.Fprintf(c.out, "rollout %s created over %d nodes: %s\n", r.UUID, len(r.Spec.Selector.Nodes), r.State)
	return nil
}

func (c *rolloutClient) list(ctx context.Context) error {
	b, err := c.do(ctx, "GET", "", nil)
	if err != nil {
		return err
	}
	if c.json {
		_, err := c.out.Write(append(b, '\n'))
		return err
	}
	var l struct {
		Rollouts []struct {
			UUID     string  `json:"uuid"`
			Running  bool    `json:"running"`
			Started  string  `json:"started_at"`
			ClosedAt *string `json:"closed_at"`
		} `json:"rollouts"`
	}
	if err := json.Unmarshal(b, &l); err != nil {
		return fmt.Errorf("the API's answer: %w", err)
	}
	w := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "UUID\tRUNNING\tSTARTED\tCLOSED")
	for _, r := range l.Rollouts {
		closed := ""
		if r.ClosedAt != nil {
			closed = *r.ClosedAt
		}
		fmt.Fprintf(w, "%s\t%v\t%s\t%s\n", r.UUID, r.Running, r.Started, closed)
	}
	return w.Flush()
}

// rolloutView is the part of GET /ironflow/v1/rollouts/{uuid} the CLI
// prints.
type rolloutView struct {
	UUID          string  `json:"uuid"`
	State         string  `json:"state"`
	Reason        string  `json:"reason"`
	Running       bool    `json:"running"`
	CurrentWave   int     `json:"current_wave"`
	Waves         [][]int `json:"waves"`
	WaveSummaries []struct {
		By map[string]int `json:"by_state"`
	} `json:"wave_summaries"`
	Succeeded int      `json:"succeeded"`
	Failed    int      `json:"failed"`
	Skipped   int      `json:"skipped"`
	Left      *float64 `json:"estimated_seconds_left"`
	Nodes     []struct {
		UUID           string `json:"uuid"`
		Wave           int    `json:"wave"`
		State          string `json:"state"`
		ProvisionState string `json:"provision_state"`
		LastError      string `json:"last_error"`
	} `json:"nodes"`
}

// progress is the one-line summary --watch prints when it changes.
func (v rolloutView) progress() string {
	// After its last wave the workflow's wave index is one past the end.
	line := fmt.Sprintf("%s: wave %d/%d, %d of %d nodes succeeded, %d failed, %d skipped", v.State, min(v.CurrentWave+1, len(v.Waves)), len(v.Waves),
		v.Succeeded, len(v.Nodes), v.Failed, v.Skipped)
	if v.Left != nil && v.Running {
		line += fmt.Sprintf(", about %s left", (time.Duration(*v.Left) * time.Second).Round(time.Second))
	}
	if v.Reason != "" {
		line += " (" + v.Reason + ")"
	}
	return line
}

func (c *rolloutClient) read(ctx context.Context, id string) ([]byte, rolloutView, error) {
	var v rolloutView
	b, err := c.do(ctx, "GET", "/"+id, nil)
	if err != nil {
		return nil, v, err
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, v, fmt.Errorf("the API's answer: %w", err)
	}
	return b, v, nil
}

func (c *rolloutClient) show(ctx context.Context, id string) error {
	b, v, err := c.read(ctx, id)
	if err != nil {
		return err
	}
	if c.watch {
		last := ""
		for {
			if p := v.progress(); p != last {
				fmt.Fprintf(c.out, "%s %s\n", time.Now().Format("15:04:05"), p)
				last = p
			}
			if !v.Running {
				break
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(c.interval):
			}
			if b, v, err = c.read(ctx, id); err != nil {
				return err
			}
		}
	}
	if c.json {
		_, err := c.out.Write(append(b, '\n'))
		return err
	}
	fmt.Fprintf(c.out, "rollout %s\n%s\n\n", v.UUID, v.progress())
	w := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "WAVE\tNODES\tBY STATE")
	for i, wave := range v.Waves {
		var states []string
		if i < len(v.WaveSummaries) {
			for st, n := range v.WaveSummaries[i].By {
				states = append(states, fmt.Sprintf("%s %d", st, n))
			}
			sort.Strings(states)
		}
		fmt.Fprintf(w, "%d\t%d\t%s\n", i+1, len(wave), strings.Join(states, ", "))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(c.out)
	w = tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NODE\tWAVE\tSTATE\tPROVISION STATE\tLAST ERROR")
	for _, n := range v.Nodes {
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\n", n.UUID, n.Wave+1, n.State, n.ProvisionState, n.LastError)
	}
	return w.Flush()
}
