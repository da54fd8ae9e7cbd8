package apiserver

import (
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/metrics"
)

// observeRequest counts every answer by route template (gin's full path,
// "/v1/nodes/:node_ident"; "unmatched" for a path no route has, so that
// a scanner's random paths cannot grow the series) and method, with its
// latency (docs/metrics.md).
func observeRequest(c *gin.Context) {
	start := time.Now()
	c.Next()
	route := c.FullPath()
	if route == "" {
		route = "unmatched"
	}
	method := c.Request.Method
	switch method {
	case "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS":
	default:
		method = "other"
	}
	metrics.APIRequests.WithLabelValues(route, method, strconv.Itoa(c.Writer.Status())).Inc()
	metrics.APIRequestDuration.WithLabelValues(route, method).Observe(time.Since(start).Seconds())
}

// observeHeartbeatInterval records the time since the agent's previous
// heartbeat (driver_internal_info's agent_last_heartbeat, as the node was
// read before this one was recorded). The first heartbeat of an agent's
// session has none: agent_last_heartbeat outlives the session (an
// operation's end drops only store.AgentSessionKeys), so a previous
// heartbeat counts only while the session's agent_url, which the session's
// first heartbeat sets and its end drops, is there.
func observeHeartbeatInterval(internal map[string]any, now time.Time) {
	prev, _ := internal[keyAgentLastHeartbeat].(string)
	if url, _ := internal[keyAgentURL].(string); prev == "" || url == "" {
		return
	}
	t, err := time.Parse("2006-01-02T15:04:05.000000", prev)
	if err != nil || !now.After(t) {
		return
	}
	metrics.AgentHeartbeatInterval.Observe(now.Sub(t).Seconds())
}
