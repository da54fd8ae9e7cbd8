package metrics

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// NodeGroup is how many nodes share a provision state, conductor group,
// maintenance flag and fault (the store's count, grouped).
type NodeGroup struct {
	ProvisionState, ConductorGroup string
	Maintenance                    bool
	// Fault is Ironic's fault ("power failure", "clean failure", ...), ""
	// for none.
	Fault string
	// Failed: ProvisionState is one of Ironic's failure states, where an
	// operator must act (retry, skip-step or abort while the workflow
	// waits; a new verb after).
	Failed bool
	// Health is the hardware health the BMC last reported through the
	// power sync (OK, Warning, Critical; "" when unknown: API 1.109).
	Health string
	Count  int
}

// Health label values of ironflow_nodes_health: Ironic's three (API 1.109)
// and unknown for a node whose driver reads none or whose BMC reported
// none.
var nodeHealths = []string{"OK", "Warning", "Critical", "unknown"}

// healthLabel bounds a stored health to nodeHealths.
func healthLabel(h string) string {
	for _, v := range nodeHealths[:3] {
		if h == v {
			return h
		}
	}
	return "unknown"
}

// NodeCounter reads the fleet's node counts (store.CountNodes).
type NodeCounter func(ctx context.Context) ([]NodeGroup, error)

// NodeCollector exports the fleet by state at each scrape: one query,
// grouped in the database, bounded by the states and conductor groups
// (never a series per node).
type NodeCollector struct {
	count   NodeCounter
	timeout time.Duration
	log     *slog.Logger
}

// DefaultNodeCountTimeout bounds the count query of one scrape.
const DefaultNodeCountTimeout = 5 * time.Second

var (
	nodesDesc = prometheus.NewDesc("ironflow_nodes",
		"Nodes by provision state and conductor group (the default group is \"\").",
		[]string{"provision_state", "conductor_group"}, nil)
	maintenanceDesc = prometheus.NewDesc("ironflow_nodes_maintenance",
		"Nodes in maintenance, by conductor group.", []string{"conductor_group"}, nil)
	unhealthyDesc = prometheus.NewDesc("ironflow_nodes_unhealthy",
		"Unhealthy nodes by conductor group and reason: Ironic's fault (power failure, clean failure, rescue abort failure, service failure) when one is set, else failed_state for a node in a failure state.",
		[]string{"conductor_group", "reason"}, nil)
	waitingDesc = prometheus.NewDesc("ironflow_nodes_waiting_for_operator",
		"Nodes in one of Ironic's failure states (deploy failed, clean failed, ...), which wait for an operator's retry, skip-step, abort or next verb, by conductor group.",
		[]string{"conductor_group"}, nil)
	healthDesc = prometheus.NewDesc("ironflow_nodes_health",
		"Nodes by hardware health, as their BMC last reported it to the power sync (OK, Warning, Critical; unknown when the driver reads none), and conductor group.",
		[]string{"conductor_group", "health"}, nil)
	countUpDesc = prometheus.NewDesc("ironflow_nodes_count_up",
		"1 when the last scrape could count the nodes in the database, 0 when the query failed (the ironflow_nodes* series are then missing).", nil, nil)
)

// RegisterNodeCollector registers the fleet's node counts with Registry.
func RegisterNodeCollector(count NodeCounter, log *slog.Logger) {
	Registry.MustRegister(&NodeCollector{count: count, timeout: DefaultNodeCountTimeout, log: log})
}

// Describe lists the series.
func (c *NodeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{nodesDesc, maintenanceDesc, unhealthyDesc, waitingDesc, healthDesc, countUpDesc} {
		ch <- d
	}
}

// Collect counts.
func (c *NodeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	groups, err := c.count(ctx)
	if err != nil {
		if c.log != nil {
			c.log.Warn("metrics: count nodes", "error", err)
		}
		ch <- prometheus.MustNewConstMetric(countUpDesc, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(countUpDesc, prometheus.GaugeValue, 1)
	type sk struct{ state, group string }
	type rk struct{ group, reason string }
	type hk struct{ group, health string }
	states, maint, unhealthy, waiting := map[sk]int{}, map[string]int{}, map[rk]int{}, map[string]int{}
	health := map[hk]int{}
	for _, g := range groups {
		// Every health of a group is exported, 0 included, so that an
		// alert on Warning or Critical resolves when the last one heals.
		for _, h := range nodeHealths {
			health[hk{g.ConductorGroup, h}] += 0
		}
		health[hk{g.ConductorGroup, healthLabel(g.Health)}] += g.Count
		states[sk{g.ProvisionState, g.ConductorGroup}] += g.Count
		maint[g.ConductorGroup] += 0
		waiting[g.ConductorGroup] += 0
		if g.Maintenance {
			maint[g.ConductorGroup] += g.Count
		}
		switch {
		case g.Fault != "":
			unhealthy[rk{g.ConductorGroup, g.Fault}] += g.Count
		case g.Failed:
			unhealthy[rk{g.ConductorGroup, "failed_state"}] += g.Count
		}
		if g.Failed {
			waiting[g.ConductorGroup] += g.Count
		}
	}
	for k, n := range states {
		ch <- prometheus.MustNewConstMetric(nodesDesc, prometheus.GaugeValue, float64(n), k.state, k.group)
	}
	for g, n := range maint {
		ch <- prometheus.MustNewConstMetric(maintenanceDesc, prometheus.GaugeValue, float64(n), g)
	}
	for g, n := range waiting {
		ch <- prometheus.MustNewConstMetric(waitingDesc, prometheus.GaugeValue, float64(n), g)
	}
	for k, n := range health {
		ch <- prometheus.MustNewConstMetric(healthDesc, prometheus.GaugeValue, float64(n), k.group, k.health)
	}
	for k, n := range unhealthy {
		ch <- prometheus.MustNewConstMetric(unhealthyDesc, prometheus.GaugeValue, float64(n), k.group, k.reason)
	}
}
