// Package client drives an ironflow (or Ironic Python Agent) ramdisk agent
// over its IPA-compatible command API: listing and executing deploy and clean
// steps, polling commands, and the standby/image/log commands the deploy flow
// needs. It is what the workflow activities use; it never talks to a BMC or to
// the ironflow API.
//
// Every request carries ?agent_token=; the token never appears in errors.
package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Named defaults.
const (
	// DefaultCallTimeout bounds one HTTP call to the agent, as Ironic's
	// [agent]command_timeout does.
	DefaultCallTimeout = 60 * time.Second
	// DefaultPollInterval is how often WaitCommand polls when given 0.
	DefaultPollInterval = 2 * time.Second
	// maxResponseBytes caps what we read from an agent: results are small,
	// collected logs are the largest (a few MiB).
	maxResponseBytes = 64 << 20
)

// Errors callers branch on.
var (
	// ErrAgentBusy: the agent is running another command (HTTP 409); retry later.
	ErrAgentBusy = errors.New("agent is busy")
	// ErrUnauthorized: the agent refused the token (HTTP 401).
	ErrUnauthorized = errors.New("agent refused the agent token")
	// ErrUnreachable: no HTTP answer (connection refused, reset, timeout, TLS).
	ErrUnreachable = errors.New("agent unreachable")
	// ErrCommandFailed matches every *CommandFailedError.
	ErrCommandFailed = errors.New("agent command failed")
	// ErrNotFound: unknown command id or extension (HTTP 404).
	ErrNotFound = errors.New("not found on agent")
)

// Client talks to one agent.
type Client struct {
	base    *url.URL
	token   string
	hc      *http.Client
	timeout time.Duration
	tlsConf *tls.Config
	err     error
	// ownHC: hc was built by New, so Close may release its connections.
	ownHC bool
}

// Option configures a Client.
type Option func(*Client)

// WithCAPEM trusts the PEM certificate(s) the agent sent as agent_verify_ca.
func WithCAPEM(pem []byte) Option {
	return func(c *Client) {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			c.err = errors.New("agent_verify_ca holds no PEM certificate")
			return
		}
		c.tlsConf = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
}

// WithInsecureTLS skips certificate verification; for labs only.
func WithInsecureTLS() Option {
	return func(c *Client) {
		c.tlsConf = &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12} //nolint:gosec // explicit lab opt-in
	}
}

// WithTimeout sets the per-call timeout (default DefaultCallTimeout).
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.timeout = d } }

// WithHTTPClient replaces the HTTP client (its TLS settings then apply as-is).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// New returns a client for the agent at baseURL (the heartbeat's
// callback_url, e.g. https://10.0.0.5:9999).
func New(baseURL, token string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("agent URL %q is not an http(s) URL", baseURL)
	}
	c := &Client{base: u, token: token, timeout: DefaultCallTimeout}
	for _, o := range opts {
		o(c)
	}
	if c.err != nil {
		return nil, c.err
	}
	if c.hc == nil {
		c.hc = newHTTPClient(c.tlsConf)
		c.ownHC = true
	}
	return c, nil
}

func newHTTPClient(tlsConf *tls.Config) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsConf
	tr.MaxIdleConnsPerHost = 2
	return &http.Client{Transport: tr}
}

// HTTPClient returns the HTTP client New would build with opts (the TLS
// options apply): a caller that keeps it and passes it back through
// WithHTTPClient reuses the agent's connections across Clients.
func HTTPClient(opts ...Option) (*http.Client, error) {
	c := &Client{}
	for _, o := range opts {
		o(c)
	}
	if c.err != nil {
		return nil, c.err
	}
	return newHTTPClient(c.tlsConf), nil
}

// URL returns the agent's base URL.
func (c *Client) URL() string { return c.base.String() }

// Close releases idle connections of an HTTP client New built; one given
// through WithHTTPClient belongs to the caller.
func (c *Client) Close() {
	if c.ownHC {
		c.hc.CloseIdleConnections()
	}
}

// apiError is IPA's error body: {type, code, message, details}.
type apiError struct {
	Type    string `json:"type"`
	Code    int    `json:"code"`
	Message string `json:"message"`
	Details string `json:"details"`
}

func (c *Client) do(ctx context.Context, method, path string, query url.Values, body any, out any) error {
	if query == nil {
		query = url.Values{}
	}
	query.Set("agent_token", c.token)
	u := *c.base
	u.Path = c.base.Path + path
	u.RawQuery = query.Encode()

	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encode %s %s body: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	cctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, method, u.String(), rd)
	if err != nil {
		return fmt.Errorf("build %s %s: %w", method, path, err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%s %s on agent %s: %w", method, path, c.base.Host, ctx.Err())
		}
		// url.Error would print the URL with the token: keep only the cause.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("%s %s on agent %s: %w: %w", method, path, c.base.Host, ErrUnreachable, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return fmt.Errorf("%s %s on agent %s: read answer: %w: %w", method, path, c.base.Host, ErrUnreachable, err)
	}
	if resp.StatusCode >= 300 {
		var ae apiError
		_ = json.Unmarshal(data, &ae)
		msg := strings.TrimSpace(ae.Message)
		if ae.Details != "" {
			msg += ": " + ae.Details
		}
		if msg == "" {
			msg = strings.TrimSpace(string(data))
			if len(msg) > 512 {
				msg = msg[:512]
			}
		}
		var kind error
		switch resp.StatusCode {
		case http.StatusConflict:
			kind = ErrAgentBusy
		case http.StatusUnauthorized, http.StatusForbidden:
			kind = ErrUnauthorized
		case http.StatusNotFound:
			kind = ErrNotFound
		default:
			return fmt.Errorf("%s %s on agent %s: HTTP %d: %s", method, path, c.base.Host, resp.StatusCode, msg)
		}
		return fmt.Errorf("%s %s on agent %s: %w (HTTP %d: %s)", method, path, c.base.Host, kind, resp.StatusCode, msg)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s on agent %s: decode answer: %w", method, path, c.base.Host, err)
		}
	}
	return nil
}

// Execute posts a command {name, params}. With wait the agent answers once the
// command is done. A FAILED result is returned together with its
// *CommandFailedError.
func (c *Client) Execute(ctx context.Context, name string, params any, wait bool) (CommandResult, error) {
	if params == nil {
		params = map[string]any{}
	}
	q := url.Values{"wait": {fmt.Sprint(wait)}}
	var r CommandResult
	if err := c.do(ctx, http.MethodPost, "/v1/commands/", q, map[string]any{"name": name, "params": params}, &r); err != nil {
		return r, fmt.Errorf("run %s: %w", name, err)
	}
	return r, r.Err()
}

// Status returns GET /v1/status.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var s Status
	err := c.do(ctx, http.MethodGet, "/v1/status", nil, nil, &s)
	return s, err
}

// Command returns one command's current result.
func (c *Client) Command(ctx context.Context, id string) (CommandResult, error) {
	var r CommandResult
	err := c.do(ctx, http.MethodGet, "/v1/commands/"+url.PathEscape(id), nil, nil, &r)
	return r, err
}

// ListCommands returns every command the agent ran, oldest first.
func (c *Client) ListCommands(ctx context.Context) ([]CommandResult, error) {
	var body struct {
		Commands []CommandResult `json:"commands"`
	}
	err := c.do(ctx, http.MethodGet, "/v1/commands/", nil, nil, &body)
	return body.Commands, err
}

// firstPoll is WaitCommand's first interval: it doubles up to the poll
// interval, so that a command that takes a moment (most steps) is seen done
// at once while a long one (an image write) is polled at the given pace.
const firstPoll = 25 * time.Millisecond

// WaitCommand polls a command until it is done or ctx ends, calling progress
// (if not nil) with every RUNNING result. Transient failures to reach the
// agent are retried until ctx ends: a loaded agent may miss one poll.
func (c *Client) WaitCommand(ctx context.Context, id string, poll time.Duration, progress func(CommandResult)) (CommandResult, error) {
	if poll <= 0 {
		poll = DefaultPollInterval
	}
	every := min(firstPoll, poll)
	t := time.NewTimer(every)
	defer t.Stop()
	var lastErr error
	for {
		r, err := c.Command(ctx, id)
		switch {
		case err == nil:
			if r.Done() {
				return r, r.Err()
			}
			if progress != nil {
				progress(r)
			}
		case errors.Is(err, ErrUnreachable):
			lastErr = err
		default:
			return r, fmt.Errorf("wait for command %s: %w", id, err)
		}
		select {
		case <-ctx.Done():
			if lastErr != nil {
				return r, fmt.Errorf("wait for command %s: %w (last error: %v)", id, ctx.Err(), lastErr)
			}
			return r, fmt.Errorf("wait for command %s: %w", id, ctx.Err())
		case <-t.C:
		}
		every = min(2*every, poll)
		t.Reset(every)
	}
}

type stepsAnswer struct {
	DeploySteps            map[string][]Step `json:"deploy_steps"`
	CleanSteps             map[string][]Step `json:"clean_steps"`
	ServiceSteps           map[string][]Step `json:"service_steps"`
	HardwareManagerVersion map[string]any    `json:"hardware_manager_version"`
}

func (a stepsAnswer) list(byManager map[string][]Step) StepList {
	out := StepList{HardwareManagerVersion: a.HardwareManagerVersion}
	for _, steps := range byManager {
		out.Steps = append(out.Steps, steps...)
	}
	sortSteps(out.Steps)
	return out
}

// sortSteps orders by priority, highest first, then by name for stability.
func sortSteps(s []Step) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && less(s[j], s[j-1]); j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func less(a, b Step) bool {
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	return a.Step < b.Step
}

func (c *Client) getSteps(ctx context.Context, name string, node, ports any) (stepsAnswer, error) {
	r, err := c.Execute(ctx, name, map[string]any{"node": orEmpty(node), "ports": orList(ports)}, true)
	if err != nil {
		return stepsAnswer{}, err
	}
	var a stepsAnswer
	if err := json.Unmarshal(r.CommandResult, &a); err != nil {
		return a, fmt.Errorf("decode %s result: %w", name, err)
	}
	return a, nil
}

// GetDeploySteps lists the agent's deploy steps (deploy.get_deploy_steps).
func (c *Client) GetDeploySteps(ctx context.Context, node, ports any) (StepList, error) {
	a, err := c.getSteps(ctx, "deploy.get_deploy_steps", node, ports)
	if err != nil {
		return StepList{}, err
	}
	return a.list(a.DeploySteps), nil
}

// GetCleanSteps lists the agent's clean steps (clean.get_clean_steps).
func (c *Client) GetCleanSteps(ctx context.Context, node, ports any) (StepList, error) {
	a, err := c.getSteps(ctx, "clean.get_clean_steps", node, ports)
	if err != nil {
		return StepList{}, err
	}
	return a.list(a.CleanSteps), nil
}

// GetServiceSteps lists the agent's service steps (service.get_service_steps).
func (c *Client) GetServiceSteps(ctx context.Context, node, ports any) (StepList, error) {
	a, err := c.getSteps(ctx, "service.get_service_steps", node, ports)
	if err != nil {
		return StepList{}, err
	}
	return a.list(a.ServiceSteps), nil
}

// ExecuteServiceStep starts a service step; follow it with WaitCommand.
func (c *Client) ExecuteServiceStep(ctx context.Context, step Step, node, ports any) (CommandResult, error) {
	return c.Execute(ctx, "service.execute_service_step", map[string]any{
		"step": step, "node": orEmpty(node), "ports": orList(ports),
	}, false)
}

// ExecuteDeployStep starts a deploy step (asynchronous on the agent); follow
// it with WaitCommand(result.ID).
func (c *Client) ExecuteDeployStep(ctx context.Context, step Step, node, ports any) (CommandResult, error) {
	return c.Execute(ctx, "deploy.execute_deploy_step", map[string]any{
		"step": step, "node": orEmpty(node), "ports": orList(ports),
	}, false)
}

// ExecuteCleanStep starts a clean step; follow it with WaitCommand.
func (c *Client) ExecuteCleanStep(ctx context.Context, step Step, node, ports any) (CommandResult, error) {
	return c.Execute(ctx, "clean.execute_clean_step", map[string]any{
		"step": step, "node": orEmpty(node), "ports": orList(ports),
	}, false)
}

// Sync flushes the agent's disks (standby.sync).
func (c *Client) Sync(ctx context.Context) error {
	_, err := c.Execute(ctx, "standby.sync", nil, true)
	return err
}

// PowerOff asks the agent to power the machine off (standby.power_off). The
// agent answers before it goes down; a connection dropped by the power-off
// itself is not an error.
func (c *Client) PowerOff(ctx context.Context) error {
	_, err := c.Execute(ctx, "standby.power_off", nil, false)
	if errors.Is(err, ErrUnreachable) && isReset(err) {
		return nil
	}
	return err
}

// Lockdown asks the agent to make itself unusable without powering the
// machine off (system.lockdown, for a node with disable_power_off): it
// answers, then stops heartbeating and serving. A connection reset while it
// stops is its answer too.
func (c *Client) Lockdown(ctx context.Context) error {
	_, err := c.Execute(ctx, "system.lockdown", nil, false)
	if errors.Is(err, ErrUnreachable) && isReset(err) {
		return nil
	}
	return err
}

// Reboot asks the agent to reboot the machine (standby.reboot).
func (c *Client) Reboot(ctx context.Context) error {
	_, err := c.Execute(ctx, "standby.reboot", nil, false)
	if errors.Is(err, ErrUnreachable) && isReset(err) {
		return nil
	}
	return err
}

func isReset(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(err.Error(), "connection reset")
}

// InstallBootloaderParams are image.install_bootloader's parameters.
type InstallBootloaderParams struct {
	RootUUID                string `json:"root_uuid,omitempty"`
	EFISystemPartitionUUID  string `json:"efi_system_part_uuid,omitempty"`
	PrepBootPartUUID        string `json:"prep_boot_part_uuid,omitempty"`
	TargetBootMode          string `json:"target_boot_mode,omitempty"`
	IgnoreBootloaderFailure bool   `json:"ignore_bootloader_failure,omitempty"`
	// SecureBoot (ironflow's agent only, never sent otherwise): the
	// instance boots with secure boot on and its loader must be signed.
	SecureBoot bool `json:"secure_boot,omitempty"`
}

// InstallBootloader starts image.install_bootloader; follow it with WaitCommand.
func (c *Client) InstallBootloader(ctx context.Context, p InstallBootloaderParams) (CommandResult, error) {
	return c.Execute(ctx, "image.install_bootloader", p, false)
}

// GetInventory returns the agent's hardware inventory (poll.get_hardware_info).
func (c *Client) GetInventory(ctx context.Context) (Inventory, error) {
	r, err := c.Execute(ctx, "poll.get_hardware_info", nil, true)
	if err != nil {
		return Inventory{}, err
	}
	var inv Inventory
	if err := json.Unmarshal(r.CommandResult, &inv); err != nil {
		return inv, fmt.Errorf("decode inventory: %w", err)
	}
	return inv, nil
}

// CollectSystemLogs returns the agent's logs as a gzip+base64 tarball
// (log.collect_system_logs), as Ironic stores them on a failed deploy.
func (c *Client) CollectSystemLogs(ctx context.Context) (string, error) {
	r, err := c.Execute(ctx, "log.collect_system_logs", nil, true)
	if err != nil {
		return "", err
	}
	var body struct {
		SystemLogs string `json:"system_logs"`
	}
	if err := json.Unmarshal(r.CommandResult, &body); err != nil {
		return "", fmt.Errorf("decode system logs: %w", err)
	}
	return body.SystemLogs, nil
}

func orEmpty(v any) any {
	if v == nil {
		return map[string]any{}
	}
	return v
}

func orList(v any) any {
	if v == nil {
		return []any{}
	}
	return v
}

// FinalizeRescue asks the agent to set the rescue user's password
// (rescue.finalize_rescue). hash is the password's crypt(3) hash, sent with
// hashed true as Ironic does, so the clear password never reaches the
// agent; the agent stops serving its API once it has answered.
func (c *Client) FinalizeRescue(ctx context.Context, hash string) error {
	_, err := c.Execute(ctx, "rescue.finalize_rescue", map[string]any{"rescue_password": hash, "hashed": true}, false)
	return err
}
