package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// minTokenLength is IPA's check that the lookup really issued a token
// (Ironic's tokens are 43 characters).
const minTokenLength = 32

// errTokenAlreadyIssued: the API answered "******", meaning a token was
// issued before (to an earlier boot of this agent) and cannot be read again.
var errTokenAlreadyIssued = errors.New("the API already issued this node's agent token (lookup answered ******); the node must be re-prepared")

type lookupAnswer struct {
	Node struct {
		UUID               string         `json:"uuid"`
		Properties         map[string]any `json:"properties"`
		InstanceInfo       map[string]any `json:"instance_info"`
		DriverInternalInfo map[string]any `json:"driver_internal_info"`
	} `json:"node"`
	Config struct {
		HeartbeatTimeout float64 `json:"heartbeat_timeout"`
		AgentToken       *string `json:"agent_token"`
	} `json:"config"`
}

func (a *Agent) lookupAndHeartbeat(ctx context.Context) {
	if !a.lookupLoop(ctx) {
		return
	}
	a.heartbeatLoop(ctx)
}

// lookupLoop retries lookup with exponential backoff until it succeeds or
// ctx ends; the API may not know the node yet (the conductor sets the state
// after powering on).
func (a *Agent) lookupLoop(ctx context.Context) bool {
	backoff := time.Second
	for {
		err := a.lookup(ctx)
		if err == nil {
			a.lookupOnce.Do(func() { close(a.lookedUp) })
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		a.log.Warn("lookup failed, retrying", "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, a.cfg.LookupBackoffMax)
	}
}

func (a *Agent) apiRequest(ctx context.Context, method, path string, query url.Values, body any) (*http.Response, []byte, error) {
	u := *a.api
	u.Path = strings.TrimRight(a.api.Path, "/") + path
	u.RawQuery = query.Encode()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("X-OpenStack-Ironic-API-Version", a.cfg.APIVersion)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", Version)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.cfg.APIClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return resp, data, err
}

// apiFault extracts Ironic's faultstring from its double-encoded error body.
func apiFault(data []byte) string {
	var outer struct {
		ErrorMessage string `json:"error_message"`
	}
	if json.Unmarshal(data, &outer) == nil && outer.ErrorMessage != "" {
		var inner struct {
			Faultstring string `json:"faultstring"`
		}
		if json.Unmarshal([]byte(outer.ErrorMessage), &inner) == nil && inner.Faultstring != "" {
			return inner.Faultstring
		}
		return outer.ErrorMessage
	}
	s := strings.TrimSpace(string(data))
	if len(s) > 256 {
		s = s[:256]
	}
	return s
}

func (a *Agent) lookup(ctx context.Context) error {
	q := url.Values{}
	if len(a.cfg.LookupAddresses) > 0 {
		q.Set("addresses", strings.Join(a.cfg.LookupAddresses, ","))
	}
	if a.cfg.NodeUUID != "" {
		q.Set("node_uuid", a.cfg.NodeUUID)
	}
	resp, data, err := a.apiRequest(ctx, http.MethodGet, "/v1/lookup", q, nil)
	if err != nil {
		return fmt.Errorf("lookup on %s: %w", a.api.Host, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("lookup on %s: HTTP %d: %s", a.api.Host, resp.StatusCode, apiFault(data))
	}
	var ans lookupAnswer
	if err := json.Unmarshal(data, &ans); err != nil {
		return fmt.Errorf("decode lookup answer: %w", err)
	}
	if ans.Node.UUID == "" {
		return errors.New("lookup answer has no node uuid")
	}
	token := a.cfg.AgentToken
	if ans.Config.AgentToken != nil {
		switch t := *ans.Config.AgentToken; {
		case t == "******":
			if token == "" {
				return errTokenAlreadyIssued
			}
		case len(t) >= minTokenLength:
			token = t
		default:
			if token == "" {
				return fmt.Errorf("lookup answer carries an agent token of %d characters, fewer than %d", len(t), minTokenLength)
			}
		}
	}
	if token == "" {
		return errors.New("lookup answer carries no agent token and none was pre-generated")
	}
	a.mu.Lock()
	a.nodeUUID = ans.Node.UUID
	a.token = token
	if ans.Config.HeartbeatTimeout > 0 {
		a.heartbeatTimeout = time.Duration(ans.Config.HeartbeatTimeout * float64(time.Second))
	}
	a.lookupNode = map[string]any{
		"uuid": ans.Node.UUID, "properties": ans.Node.Properties,
		"instance_info": ans.Node.InstanceInfo, "driver_internal_info": ans.Node.DriverInternalInfo,
	}
	a.mu.Unlock()
	a.log.Info("lookup succeeded", "node", ans.Node.UUID, "heartbeat_timeout", ans.Config.HeartbeatTimeout)
	return nil
}

// heartbeatLoop heartbeats right away, then every interval and after each
// command; failures are logged and retried: an API outage must never stop
// the agent.
func (a *Agent) heartbeatLoop(ctx context.Context) {
	const retryAfterFailure = 5 * time.Second
	next := time.Duration(0)
	for {
		t := time.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-a.forceHB:
			t.Stop()
		}
		a.hbMu.Lock()
		if !a.heartbeats.Load() {
			a.hbMu.Unlock()
			next = a.heartbeatInterval()
			continue
		}
		err := a.heartbeat(ctx)
		a.hbMu.Unlock()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			a.log.Warn("heartbeat failed", "node", a.NodeUUID(), "err", err)
			next = min(a.heartbeatInterval(), retryAfterFailure)
			continue
		}
		a.hbCount.Add(1)
		next = a.heartbeatInterval()
	}
}

func (a *Agent) heartbeat(ctx context.Context) error {
	body := map[string]any{
		"callback_url":  a.callbackURL,
		"agent_token":   a.currentToken(),
		"agent_version": Version,
	}
	if a.caPEM != nil {
		body["agent_verify_ca"] = string(a.caPEM)
	}
	node := a.NodeUUID()
	resp, data, err := a.apiRequest(ctx, http.MethodPost, "/v1/heartbeat/"+url.PathEscape(node), url.Values{}, body)
	if err != nil {
		return fmt.Errorf("heartbeat to %s: %w", a.api.Host, err)
	}
	// Ironic answers exactly 202; IPA treats anything else as an error.
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("heartbeat to %s: HTTP %d: %s", a.api.Host, resp.StatusCode, apiFault(data))
	}
	return nil
}
