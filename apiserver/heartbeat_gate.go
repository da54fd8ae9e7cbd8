package apiserver

import (
	"sync"
	"time"

	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// A heartbeat costs one Temporal signal: a persisted event and a workflow
// task on the node's workflow. A workflow needs every heartbeat only while
// it waits for the agent to call back (the wait states) or for a status
// report (agent_status); while an agent step runs it only needs to know the
// agent is alive, once per heartbeat timeout. So outside the wait states
// the API signals a node's workflow at most once per signalEveryFraction of
// the node's heartbeat timeout; the store still records every heartbeat.
//
// With the agent heartbeating every 0.3–0.6 of the timeout (as IPA does),
// the longest gap the workflow sees between signals is under 0.6 + 1/5 of
// the timeout, so a live agent is never taken for a lost one.
const signalEveryFraction = 5

// callbackStates are the states where a workflow waits for the agent's
// call back: every heartbeat is signalled.
var callbackStates = []provision.State{
	provision.DeployWait, provision.CleanWait, provision.InspectWait, provision.RescueWait,
	provision.ServiceWait,
}

// gateSweepEvery bounds how often expired entries are dropped from the gate.
const gateSweepEvery = time.Minute

// signalGate remembers, per node, until when this API process need not
// signal the node's workflow again. Several API processes each keep their
// own: the workflow then gets a few more signals, never fewer.
type signalGate struct {
	mu        sync.Mutex
	until     map[string]time.Time
	lastSweep time.Time
}

func newSignalGate() *signalGate {
	return &signalGate{until: map[string]time.Time{}}
}

// allow reports whether a heartbeat of node at now is to be signalled, and
// if so closes the gate for every. A forced heartbeat is always signalled
// and closes the gate as well: the workflow has just heard from the agent.
func (g *signalGate) allow(node string, now time.Time, every time.Duration, force bool) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if now.Sub(g.lastSweep) > gateSweepEvery {
		for k, t := range g.until {
			if !now.Before(t) {
				delete(g.until, k)
			}
		}
		g.lastSweep = now
	}
	if t, ok := g.until[node]; ok && now.Before(t) && !force {
		return false
	}
	g.until[node] = now.Add(every)
	return true
}

// reopen lets the node's next heartbeat through: the signal just allowed
// did not reach the workflow.
func (g *signalGate) reopen(node string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.until, node)
}

// heartbeatTimeout is the node's: driver_info ramdisk_heartbeat_timeout,
// as the node's workflow reads it, else the service's.
func (s *server) heartbeatTimeout(n *store.Node) time.Duration {
	if d, ok, err := workflows.DriverInfoSeconds(n.DriverInfo, workflows.DriverInfoHeartbeatTimeout); ok && err == nil {
		return d
	}
	return s.cfg.RamdiskHeartbeatTimeout
}
