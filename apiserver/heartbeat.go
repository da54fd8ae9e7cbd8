package apiserver

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/pyliteral"
	"github.com/ironflow/ironflow/signature"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// heartbeat answers POST /v1/heartbeat/{node} in three steps: parse the
// body (parseHeartbeat), check it against the node as Ironic does
// (checkHeartbeat, a pure function), act: record what the agent said in
// driver_internal_info and signal the node's workflow (when the signal gate
// lets it through).
func (s *server) heartbeat(c *gin.Context) error {
	hb, err := parseHeartbeat(c)
	if err != nil {
		return err
	}
	ident := c.Param("node")
	n, err := s.loadNode(c, ident)
	if err != nil {
		return err
	}
	if err := checkHeartbeat(n, hb, s.cfg.AgentTokenRequired); err != nil {
		if errors.Is(err, errCallbackURLChanged) {
			s.log.WarnContext(c.Request.Context(), "heartbeat refused: callback_url changed", "node", n.UUID)
		}
		return err
	}
	// Every write below is conditional on the node still holding the token
	// the heartbeat was checked against: the node's operation may end and
	// wipe the agent's session between the read above and these writes,
	// and a late write must not bring the session back. Such a heartbeat
	// is answered as one that came after the wipe.
	stored, _ := n.DriverInternalInfo[keyAgentToken].(string)
	// The first callback_url is claimed by a conditional write, so that of
	// heartbeats racing from different URLs only one is accepted.
	if prev, _ := n.DriverInternalInfo[keyAgentURL].(string); prev == "" && *hb.CallbackURL != "" {
		claimed, err := s.store.ClaimAgentURL(c.Request.Context(), n.UUID, stored, *hb.CallbackURL)
		if err != nil {
			return s.heartbeatWriteErr(n, ident, err)
		}
		if !claimed {
			s.log.WarnContext(c.Request.Context(), "heartbeat refused: callback_url changed", "node", n.UUID)
			return badRequest("Detected change in ramdisk provided \"callback_url\"")
		}
	}
	now := time.Now().UTC()
	if err := s.recordHeartbeat(c.Request.Context(), n, stored, hb, now); err != nil {
		return s.heartbeatWriteErr(n, ident, err)
	}
	observeHeartbeatInterval(n.DriverInternalInfo, now)
	sig := hb.signal(now)
	// The signal names the token the node's operation holds, so that it
	// cannot be sent again into a later operation (signature.CheckToken).
	sig.AgentTokenRef = signature.TokenRef(stored)
	if err := s.signalHeartbeat(c.Request.Context(), n, sig, now); err != nil {
		return err
	}
	writeEmpty(c, http.StatusAccepted, "")
	return nil
}

// heartbeatWriteErr answers a heartbeat whose write failed: the node gone,
// or its agent session ended since the heartbeat was checked (Ironic's
// answer to a heartbeat whose token the node no longer holds).
func (s *server) heartbeatWriteErr(n *store.Node, ident string, err error) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nodeNotFound(ident)
	case errors.Is(err, store.ErrAgentSessionEnded):
		s.log.Info("heartbeat refused: the agent session ended while it was recorded", "node", n.UUID)
		return badRequest("Invalid or missing agent token received.")
	}
	return err
}

// heartbeatBody is what the agent posts to /v1/heartbeat/{node}.
type heartbeatBody struct {
	CallbackURL        *string
	AgentToken         *string
	AgentVersion       *string
	AgentVerifyCA      *string
	AgentStatus        *string
	AgentStatusMessage *string
}

// parseHeartbeat reads the body: strings or nulls, unknown keys ignored so
// that newer agents still heartbeat, keys above the request's version
// refused as Ironic does.
func parseHeartbeat(c *gin.Context) (heartbeatBody, error) {
	var hb heartbeatBody
	body, err := decodeObjectLimit(c, maxHeartbeatBytes)
	if err != nil {
		return hb, err
	}
	fields := map[string]**string{
		"callback_url": &hb.CallbackURL, "agent_token": &hb.AgentToken, "agent_version": &hb.AgentVersion,
		"agent_verify_ca": &hb.AgentVerifyCA, "agent_status": &hb.AgentStatus,
		"agent_status_message": &hb.AgentStatusMessage,
	}
	for k, v := range body {
		dst, ok := fields[k]
		if !ok {
			continue
		}
		switch t := v.(type) {
		case nil:
		case string:
			if max := heartbeatFieldMax[k]; len(t) > max {
				return hb, badRequest("Invalid value for %s: longer than %d bytes", k, max)
			}
			s := t
			*dst = &s
		default:
			return hb, badRequest("Invalid value for %s: %s is not a string", k, pyliteral.Repr(v))
		}
	}
	if hb.AgentVersion != nil && ver(c) < v36AgentVersion {
		return hb, badRequest("Field \"agent_version\" not recognised")
	}
	if hb.AgentVerifyCA != nil && ver(c) < v68AgentVerifyCA {
		return hb, badRequest("Field \"agent_verify_ca\" not recognised")
	}
	if (hb.AgentStatus != nil || hb.AgentStatusMessage != nil) && ver(c) < v72AgentStatus {
		return hb, badRequest("Field \"agent_status\" not recognised")
	}
	return hb, nil
}

// heartbeatFieldMax bounds each heartbeat field: what the workflow is
// signalled lands in its history, and an agent status message is a line of
// text, not a log.
var heartbeatFieldMax = map[string]int{
	"callback_url": 2048, "agent_token": 256, "agent_version": 256,
	"agent_verify_ca": 64 << 10, "agent_status": 64, "agent_status_message": 4096,
}

// errCallbackURLChanged marks the refusal of a heartbeat whose callback_url
// is not the one the node's agent gave first (it is logged).
var errCallbackURLChanged = errors.New("callback_url changed")

// checkHeartbeat checks a heartbeat against its node, in Ironic's order.
func checkHeartbeat(n *store.Node, hb heartbeatBody, tokenRequired bool) error {
	if hb.CallbackURL == nil {
		return badRequest("Missing mandatory parameter: callback_url")
	}
	// An empty callback_url is what an installer without an agent sends
	// (Ironic's anaconda kickstart): a status report, nothing to call back.
	if *hb.CallbackURL == "" && hb.AgentStatus == nil {
		return badRequest("Missing mandatory parameter: callback_url")
	}
	if u, err := url.Parse(*hb.CallbackURL); *hb.CallbackURL != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
		return badRequest("Invalid callback_url: expected an http(s) URL with a host")
	}
	if hb.AgentStatus != nil && !slices.Contains(agentStatuses, *hb.AgentStatus) {
		return badRequest("Agent status is invalid. Valid states are %s.", strings.Join(agentStatuses, ","))
	}
	if hb.AgentToken == nil && tokenRequired {
		return badRequest("Agent token is required for heartbeat processing.")
	}
	if hb.AgentVersion == nil || *hb.AgentVersion == "" {
		return badRequest("Agent did not transmit a version, and a version is required. Please update the agent being used.")
	}
	if hb.AgentToken != nil || tokenRequired {
		stored, _ := n.DriverInternalInfo[keyAgentToken].(string)
		given := ""
		if hb.AgentToken != nil {
			given = *hb.AgentToken
		}
		if stored == "" || subtle.ConstantTimeCompare([]byte(stored), []byte(given)) != 1 {
			return badRequest("Invalid or missing agent token received.")
		}
	}
	if prev, _ := n.DriverInternalInfo[keyAgentURL].(string); prev != "" && *hb.CallbackURL != "" && prev != *hb.CallbackURL {
		return fmt.Errorf("%w: %w", errCallbackURLChanged, badRequest("Detected change in ramdisk provided \"callback_url\""))
	}
	return nil
}

// recordHeartbeat merges what the agent said into driver_internal_info
// while the node's agent token is still token (concurrent heartbeats share
// statements: hbWrites).
func (s *server) recordHeartbeat(ctx context.Context, n *store.Node, token string, hb heartbeatBody, now time.Time) error {
	kv := map[string]any{
		keyAgentLastHeartbeat: now.Format("2006-01-02T15:04:05.000000"),
		keyAgentVersion:       *hb.AgentVersion,
	}
	if *hb.CallbackURL != "" {
		kv[keyAgentURL] = *hb.CallbackURL
	}
	if hb.AgentVerifyCA != nil {
		kv[keyAgentVerifyCA] = *hb.AgentVerifyCA
	}
	if err := s.hbWrites.Merge(ctx, n.UUID, token, kv); err != nil {
		if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrAgentSessionEnded) {
			return err
		}
		return fmt.Errorf("record heartbeat of node %s: %w", n.UUID, err)
	}
	return nil
}

// signal is the heartbeat signal a checked body makes.
func (hb heartbeatBody) signal(now time.Time) workflows.Heartbeat {
	sig := workflows.Heartbeat{CallbackURL: *hb.CallbackURL, AgentVersion: *hb.AgentVersion, ReceivedAt: now}
	if hb.AgentVerifyCA != nil {
		sig.AgentVerifyCA = *hb.AgentVerifyCA
	}
	if hb.AgentStatus != nil {
		sig.AgentStatus = *hb.AgentStatus
	}
	if hb.AgentStatusMessage != nil {
		sig.AgentStatusMessage = *hb.AgentStatusMessage
	}
	return sig
}

// signalHeartbeat tells the node's workflow. Outside the wait states and
// without a status report the workflow only needs to know the agent lives:
// see signalGate.
func (s *server) signalHeartbeat(ctx context.Context, n *store.Node, sig workflows.Heartbeat, now time.Time) error {
	force := sig.AgentStatus != "" || slices.Contains(callbackStates, n.ProvisionState)
	if !s.hbGate.allow(n.UUID, now, s.heartbeatTimeout(n)/signalEveryFraction, force) {
		return nil
	}
	err := s.eng.Signal(ctx, n.UUID, workflows.SignalHeartbeat, s.signed(n.UUID, sig))
	switch {
	case errors.Is(err, ErrNoWorkflow):
		// Ironic answers 202 to a heartbeat from a node that is not waiting
		// for one and only logs it; so do we.
		s.log.InfoContext(ctx, "heartbeat from a node no workflow is waiting on", "node", n.UUID, "provision_state", n.ProvisionState)
	case err != nil:
		s.hbGate.reopen(n.UUID)
		return fmt.Errorf("signal heartbeat to node %s: %w", n.UUID, err)
	}
	return nil
}

// signed is the heartbeat with the MAC the worker checks before the workflow
// acts on it: a signal sent straight to Temporal has none.
func (s *server) signed(node string, hb workflows.Heartbeat) workflows.Heartbeat {
	if len(s.cfg.SignalKey) > 0 {
		signature.Sign(s.cfg.SignalKey, node, &hb)
	}
	return hb
}
