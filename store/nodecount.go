package store

import (
	"context"
	"fmt"
)

// NodeCount is how many nodes share a provision state, conductor group,
// maintenance flag, fault and hardware health: the fleet as the metrics endpoint exports it
// (package metrics' NodeCollector), without a row per node.
type NodeCount struct {
	ProvisionState string
	ConductorGroup string
	Maintenance    bool
	Fault          string // "" for none
	// Health is the BMC's hardware health the power sync last read
	// (OK, Warning, Critical; "" for unknown, API 1.109).
	Health string
	Count  int
}

// CountNodesByState counts the nodes, grouped in the database (one index-only
// pass on a fleet of thousands).
func (s *Store) CountNodesByState(ctx context.Context) ([]NodeCount, error) {
	rows, err := s.pool.Query(ctx, `SELECT provision_state, conductor_group, maintenance, COALESCE(fault, ''), COALESCE(health, ''), count(*)
		FROM nodes GROUP BY 1, 2, 3, 4, 5`)
	if err != nil {
		return nil, fmt.Errorf("count nodes: %w", err)
	}
	defer rows.Close()
	var out []NodeCount
	for rows.Next() {
		var c NodeCount
		if err := rows.Scan(&c.ProvisionState, &c.ConductorGroup, &c.Maintenance, &c.Fault, &c.Health, &c.Count); err != nil {
			return nil, fmt.Errorf("count nodes: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count nodes: %w", err)
	}
	return out, nil
}
