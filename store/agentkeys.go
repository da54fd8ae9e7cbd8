package store

// driver_internal_info keys of an agent's session, Ironic's names (Ironic's
// agent token documentation). The worker's activities write the token and
// read the URL and CA; the API hands the token out on lookup, checks it on
// heartbeat and records the URL, version and CA; the node view masks the
// token.
const (
	// KeyAgentToken is the agent's secret token.
	KeyAgentToken = "agent_secret_token"
	// KeyAgentTokenPregenerated is true when the token was handed to the
	// machine with its boot (virtual-media ISO, kickstart), so lookup never
	// hands one out.
	KeyAgentTokenPregenerated = "agent_secret_token_pregenerated"
	// KeyAgentURL is the callback_url of the agent's last heartbeat.
	KeyAgentURL = "agent_url"
	// KeyAgentVerifyCA is the CA the agent's TLS certificate is checked
	// against (agent_verify_ca of its heartbeat).
	KeyAgentVerifyCA = "agent_verify_ca"
	// KeyAgentVersion is the agent_version of its last heartbeat.
	KeyAgentVersion = "agent_version"
	// KeyAgentLastHeartbeat is when the agent last heartbeated.
	KeyAgentLastHeartbeat = "agent_last_heartbeat"
)

// AgentSessionKeys are the keys of one agent's session that an operation
// drops when it ends (Ironic's wipe_token_and_url, and the CA with them).
func AgentSessionKeys() []string {
	return []string{KeyAgentToken, KeyAgentTokenPregenerated, KeyAgentURL, KeyAgentVerifyCA}
}
