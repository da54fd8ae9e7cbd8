package activities

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/ironflow/ironflow/bmc"
	"github.com/ironflow/ironflow/metrics"
	"github.com/ironflow/ironflow/store"
)

// Sensor polling (docs/metrics.md, "Hardware sensors"): a worker started
// with --sensors-interval reads the sensors of its conductor groups' nodes
// from their BMCs at that interval, as Ironic's conductor sends sensor data
// (send_sensor_data) for ironic-prometheus-exporter, and hands the last
// readings to metrics.Sensors, which /metrics/sensors serves. Readings are
// not state: they go through no workflow and no history. Nodes in
// maintenance are left out, as Ironic leaves them out; a node whose BMC
// fails keeps no stale readings.

// Sensor polling defaults.
const (
	// DefaultSensorsMaxNodes caps the nodes one worker reads per round:
	// beyond it, each round reads the first nodes in id order and counts
	// the others as skipped_over_cap (about 10 series per node, 100,000
	// at the cap: split a larger fleet into conductor groups).
	DefaultSensorsMaxNodes = 1000
	// sensorsParallel is how many BMCs one worker reads at once.
	sensorsParallel = 8
	// sensorsReadTimeout bounds one node's read.
	sensorsReadTimeout = 30 * time.Second
)

// SensorPoller reads the sensors of the nodes of Groups.
type SensorPoller struct {
	Activities *Activities
	Groups     []string
	Interval   time.Duration
	MaxNodes   int
	Log        *slog.Logger
}

// Run polls until ctx ends (a zero Interval: not at all).
func (p *SensorPoller) Run(ctx context.Context) {
	if p.Interval <= 0 {
		return
	}
	t := time.NewTicker(p.Interval)
	defer t.Stop()
	for {
		p.Poll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

var sensorColumns = []string{"name", "instance_uuid", "maintenance", "driver", "driver_info"}

// Poll reads every node's sensors once.
func (p *SensorPoller) Poll(ctx context.Context) {
	max := p.MaxNodes
	if max <= 0 {
		max = DefaultSensorsMaxNodes
	}
	var nodes []*store.Node
	for _, g := range p.Groups {
		ns, err := p.Activities.Store.ListNodes(ctx, store.NodeFilter{ConductorGroup: &g, Maintenance: new(false), Fields: sensorColumns})
		if err != nil {
			p.Log.Warn("sensors: list nodes", "conductor_group", g, "error", err)
			continue
		}
		nodes = append(nodes, ns...)
	}
	if over := len(nodes) - max; over > 0 {
		p.Log.Warn("sensors: more nodes than --sensors-max-nodes; the others are not read", "nodes", len(nodes), "max", max)
		metrics.SensorReads.WithLabelValues("skipped_over_cap").Add(float64(over))
		nodes = nodes[:max]
	}
	keep := map[string]bool{}
	var mu sync.Mutex
	sem := make(chan struct{}, sensorsParallel)
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			ns, err := p.read(ctx, n)
			outcome := metrics.ErrorOutcome(err, sensorOutcomes)
			if errors.Is(err, errNoSensors) {
				return
			}
			metrics.SensorReads.WithLabelValues(outcome).Inc()
			if err != nil {
				p.Log.Info("sensors: read failed", "node", n.UUID, "error", err)
				return
			}
			metrics.Sensors.Set(ns)
			mu.Lock()
			keep[n.UUID] = true
			mu.Unlock()
		}()
	}
	wg.Wait()
	metrics.Sensors.Keep(keep)
}

var errNoSensors = errors.New("the node's driver reads no sensors")

var sensorOutcomes = []metrics.ErrorClass{
	{Outcome: metrics.OutcomeUnreachable, Err: bmc.ErrUnreachable},
	{Outcome: metrics.OutcomeAuth, Err: bmc.ErrAuth},
	{Outcome: metrics.OutcomeBusy, Err: bmc.ErrBusy},
	{Outcome: metrics.OutcomeUnsupported, Err: bmc.ErrUnsupported},
	{Outcome: metrics.OutcomeInvalidConfig, Err: bmc.ErrInvalidConfig},
}

// read reads one node's sensors.
func (p *SensorPoller) read(ctx context.Context, n *store.Node) (metrics.NodeSensors, error) {
	ns := metrics.NodeSensors{UUID: n.UUID, Name: deref(n.Name), InstanceUUID: deref(n.InstanceUUID)}
	ctx, cancel := context.WithTimeout(ctx, sensorsReadTimeout)
	defer cancel()
	d, err := p.Activities.driverOf(n)
	if err != nil {
		return ns, err
	}
	defer d.Close()
	sr, ok := d.(bmc.SensorReader)
	if !ok {
		return ns, errNoSensors
	}
	ss, err := sr.Sensors(ctx)
	if err != nil {
		return ns, err
	}
	for _, s := range ss {
		ns.Samples = append(ns.Samples, metrics.SensorSample{Kind: string(s.Kind), ID: s.ID, Context: s.Context,
			Value: s.Value, HasValue: s.HasValue, Units: s.Units, Health: s.Health})
	}
	return ns, nil
}
