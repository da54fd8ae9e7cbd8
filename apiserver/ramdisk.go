package apiserver

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/signature"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// Keys of driver_internal_info the ramdisk endpoints own.
const (
	keyAgentToken         = store.KeyAgentToken
	keyAgentTokenPregen   = store.KeyAgentTokenPregenerated
	keyAgentURL           = store.KeyAgentURL
	keyAgentVersion       = store.KeyAgentVersion
	keyAgentLastHeartbeat = store.KeyAgentLastHeartbeat
	keyAgentVerifyCA      = store.KeyAgentVerifyCA
)

// lookupStates are where an agent may find its node with restrict_lookup.
var lookupStates = []provision.State{
	provision.Deploying, provision.DeployWait, provision.Cleaning, provision.CleanWait,
	provision.Inspecting, provision.InspectWait, provision.Rescuing, provision.RescueWait,
	provision.ServiceWait,
}

// inspectionStates are where an agent may send inspection data with
// restrict_lookup.
var inspectionStates = []provision.State{provision.Inspecting, provision.InspectWait}

// agentStatuses are the agent_status values a heartbeat may carry (1.72).
var agentStatuses = []string{workflows.AgentStatusStart, workflows.AgentStatusEnd, workflows.AgentStatusError}

// lookup answers GET /v1/lookup: the agent finds its node by MAC or UUID
// and, at ≥1.62, gets its one-time token.
func (s *server) lookup(c *gin.Context) error {
	var macs []string
	for _, a := range strings.Split(c.Query("addresses"), ",") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		if mac, ok := normalizeMAC(a); ok {
			macs = append(macs, mac)
		}
	}
	nodeUUID := c.Query("node_uuid")
	if len(macs) == 0 && nodeUUID == "" {
		return badRequest("At least one of 'addresses' and 'node_uuid' parameters is required")
	}
	ctx := c.Request.Context()
	n, err := s.ramdiskNode(ctx, nodeUUID, macs)
	if err != nil {
		return err
	}
	// Not found and not in a lookup state look the same to the agent, as
	// Ironic: the reason is only logged.
	if n == nil {
		s.log.InfoContext(c.Request.Context(), "lookup found no node", "macs", macs, "node_uuid", nodeUUID)
		return resourceNotFound()
	}
	if s.cfg.RestrictLookup && !slices.Contains(lookupStates, n.ProvisionState) {
		s.log.InfoContext(c.Request.Context(), "lookup refused: node not in a lookup state", "node", n.UUID, "provision_state", n.ProvisionState)
		return resourceNotFound()
	}

	var states []provision.State
	if s.cfg.RestrictLookup {
		states = lookupStates
	}
	answer, err := s.lookupAnswer(c, n, states)
	if errors.Is(err, store.ErrStateConflict) {
		s.log.InfoContext(c.Request.Context(), "lookup refused: the node left the lookup states while it was looked up", "node", n.UUID)
		return resourceNotFound()
	}
	if err != nil {
		return err
	}
	writeJSON(c, http.StatusOK, answer)
	return nil
}

// lookupAnswer is the body of a lookup (and, from API 1.84, of
// continue_inspection): the node as the agent sees it and its config,
// with the agent token issued if the node has none yet and is still in one
// of states (any state when empty; else store.ErrStateConflict).
func (s *server) lookupAnswer(c *gin.Context, n *store.Node, states []provision.State) (map[string]any, error) {
	var token any // null below 1.62
	if ver(c) >= v62AgentToken {
		t, err := s.issueToken(c, n, states)
		if err != nil {
			return nil, err
		}
		token = t
	}
	base := s.baseURL(c)
	nodeView := map[string]any{
		"uuid":                 n.UUID,
		"properties":           mapOrEmpty(n.Properties),
		"instance_info":        maskSecrets(n.InstanceInfo, scopeInstanceInfo),
		"driver_internal_info": maskSecrets(n.DriverInternalInfo, scopeDriverInternalInfo),
		"links":                selfLinks(base, "nodes/"+n.UUID),
	}
	return map[string]any{
		"node":   nodeView,
		"config": s.agentConfig(token, s.heartbeatTimeout(n)),
	}, nil
}

// issueToken returns the token to hand out: a new one on the first lookup,
// "******" once one exists. The check and the write are one conditional
// update (store.IssueAgentToken), so two racing lookups never both get a
// token, and a lookup that read the node before its operation ended (in a
// state of states) does not hand a token to a node that left them.
func (s *server) issueToken(c *gin.Context, n *store.Node, states []provision.State) (string, error) {
	if _, ok := n.DriverInternalInfo[keyAgentToken]; ok {
		return masked, nil
	}
	tok, err := store.NewAgentToken()
	if err != nil {
		return "", err
	}
	updated, issued, err := s.store.IssueAgentToken(c.Request.Context(), n.UUID, tok, states)
	if errors.Is(err, store.ErrStateConflict) {
		return "", err
	}
	if err != nil {
		return "", fmt.Errorf("store agent token for node %s: %w", n.UUID, err)
	}
	if !issued {
		return masked, nil
	}
	*n = *updated
	s.log.InfoContext(c.Request.Context(), "issued agent token", "node", n.UUID)
	return tok, nil
}

// agentConfig is the config block of a lookup answer, as Ironic sends it.
// heartbeat_timeout is the node's own (driver_info overrides the service's)
// so that the agent heartbeats often enough for the timeout its workflow
// enforces.
func (s *server) agentConfig(token any, heartbeatTimeout time.Duration) map[string]any {
	return map[string]any{
		"agent_token":                    token,
		"agent_token_required":           s.cfg.AgentTokenRequired,
		"heartbeat_timeout":              int(math.Ceil(heartbeatTimeout.Seconds())),
		"disable_deep_image_inspection":  false,
		"enable_bios_bootloader_install": true,
		// What ironflow's agent writes (checkDeclaredFormat in
		// agent/image_qcow2.go): ISO images boot through the ramdisk
		// deploy interface, never written by the agent.
		"permitted_image_formats": []string{"raw", "gpt", "qcow2"},
		"metrics": map[string]any{
			"backend": "noop", "global_prefix": nil, "prepend_host": false,
			"prepend_host_reverse": true, "prepend_uuid": false,
		},
		"metrics_statsd": map[string]any{"statsd_host": "localhost", "statsd_port": 8125},
	}
}

// continueInspectionGate is Ironic's version rule of the endpoint (minor:
// API 1.84): a request at 1.84 or later, or one that names no version at all
// (1.1, what IPA's inspection callback sends), is served; ?node_uuid=
// needs 1.84. Anything else is 404 with Ironic's message.
func continueInspectionGate(minor int, h handler) handler {
	return func(c *gin.Context) error {
		v := ver(c)
		if (v != MinVersionMinor && v < minor) || (c.Query("node_uuid") != "" && v < minor) {
			return errorf(http.StatusNotFound, "API version %s or newer is required", versionString(minor))
		}
		return h(c)
	}
}

// continueInspection answers POST /v1/continue_inspection: the agent sends
// the inventory it collected. The node is found by ?node_uuid= or by the
// MACs of the inventory's interfaces; the inventory is stored and the node's
// workflow gets a heartbeat with agent_status "end" (the inspection step
// is done).
func (s *server) continueInspection(c *gin.Context) error {
	body, err := decodeObjectLimit(c, maxInspectionBytes)
	if err != nil {
		return err
	}
	inv, ok := body["inventory"].(map[string]any)
	if !ok {
		return badRequest("Missing mandatory parameter: inventory")
	}
	plugin, _ := normalizeNumbers(body["plugin_data"]).(map[string]any)
	ctx := c.Request.Context()

	var macs []string
	ifaces, _ := inv["interfaces"].([]any)
	for _, it := range ifaces {
		m, _ := it.(map[string]any)
		if a, ok := m["mac_address"].(string); ok {
			if mac, ok := normalizeMAC(a); ok {
				macs = append(macs, mac)
			}
		}
	}
	n, err := s.ramdiskNode(ctx, c.Query("node_uuid"), macs)
	if err != nil {
		return err
	}
	if n == nil || (s.cfg.RestrictLookup && !slices.Contains(inspectionStates, n.ProvisionState)) {
		return resourceNotFound()
	}
	// Inspection data comes only from the agent that looked up and holds
	// the node's token (Ironic's agent-token-for-inspection rule); before
	// any lookup there is no token and the data is refused, unless the
	// operator opted out.
	stored, _ := n.DriverInternalInfo[keyAgentToken].(string)
	if stored != "" || !s.cfg.InspectionWithoutToken {
		given, _ := body["agent_token"].(string)
		if given == "" {
			given = c.GetHeader("X-Agent-Token")
		}
		if stored == "" || subtle.ConstantTimeCompare([]byte(stored), []byte(given)) != 1 {
			return badRequest("Invalid or missing agent token received.")
		}
	}
	// From 1.84 the answer is the lookup's, taken before the data is
	// processed, as Ironic does; before, inspector's {"uuid": ...}.
	var answer map[string]any
	if ver(c) >= v84ContinueInspection {
		var states []provision.State
		if s.cfg.RestrictLookup {
			states = inspectionStates
		}
		answer, err = s.lookupAnswer(c, n, states)
		if errors.Is(err, store.ErrStateConflict) {
			return resourceNotFound()
		}
		if err != nil {
			return err
		}
	}
	if err := s.store.PutInventory(ctx, &store.Inventory{
		NodeUUID: n.UUID, Inventory: normalizeNumbers(inv).(map[string]any), PluginData: plugin,
	}); err != nil {
		return fmt.Errorf("store inventory of node %s: %w", n.UUID, err)
	}
	agentURL, _ := n.DriverInternalInfo[keyAgentURL].(string)
	agentVersion, _ := n.DriverInternalInfo[keyAgentVersion].(string)
	// The signal names the node's token, as a heartbeat's does
	// (heartbeat.go): the worker refuses one that names another.
	err = s.eng.Signal(ctx, n.UUID, workflows.SignalHeartbeat, s.signed(n.UUID, workflows.Heartbeat{
		CallbackURL: agentURL, AgentVersion: agentVersion, AgentStatus: "end",
		AgentStatusMessage: "inspection data received", ReceivedAt: time.Now().UTC(),
		AgentTokenRef: signature.TokenRef(stored),
	}))
	if err != nil && !errors.Is(err, ErrNoWorkflow) {
		return fmt.Errorf("signal inspection data to node %s: %w", n.UUID, err)
	}
	s.addHistory(c, n.UUID, store.SeverityInfo, "inspection", "Inspection data received from the agent")
	if answer == nil {
		answer = map[string]any{"uuid": n.UUID}
	}
	writeJSON(c, http.StatusAccepted, answer)
	return nil
}

// ramdiskNode finds the node a ramdisk speaks for: by node_uuid when given,
// else by its MACs when exactly one node has them. nil when none matches.
func (s *server) ramdiskNode(ctx context.Context, nodeUUID string, macs []string) (*store.Node, error) {
	if nodeUUID != "" {
		if !isUUID(nodeUUID) {
			return nil, badRequest("Expected a UUID for node_uuid but received %s.", nodeUUID)
		}
		n, err := s.store.GetNode(ctx, nodeUUID)
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("lookup node %s: %w", nodeUUID, err)
		}
		return n, nil
	}
	if len(macs) == 0 {
		return nil, nil
	}
	nodes, err := s.store.NodesByMACs(ctx, macs)
	if err != nil {
		return nil, fmt.Errorf("lookup nodes by MAC: %w", err)
	}
	if len(nodes) > 1 {
		s.log.WarnContext(ctx, "ramdisk MACs match more than one node", "macs", macs, "nodes", len(nodes))
	}
	if len(nodes) != 1 {
		return nil, nil
	}
	return nodes[0], nil
}
