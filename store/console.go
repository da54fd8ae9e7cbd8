package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Where a node's enabled console lives, in its driver_internal_info (as
// Ironic keeps the console port it allocated there): the worker holding it
// (its conductor hostname) and the host:port of its endpoints.
// docs/console.md says how these are used.
const (
	KeyConsoleHolder           = "console_holder"
	KeyConsoleAddress          = "console_address"
	KeyConsoleGraphicalAddress = "console_graphical_address"
)

// ConsoleKeys are every driver_internal_info key of a held console.
var ConsoleKeys = []string{KeyConsoleHolder, KeyConsoleAddress, KeyConsoleGraphicalAddress}

// ConsoleHeld is one node whose console is enabled, as a worker that starts
// reads it to bring consoles back.
type ConsoleHeld struct {
	NodeUUID string
	Holder   string // conductor hostname; "" when none recorded
}

// EnabledConsoles lists the nodes of a conductor group whose console is
// enabled, with the worker recorded as holding each.
func (s *Store) EnabledConsoles(ctx context.Context, group string) ([]ConsoleHeld, error) {
	rows, _ := s.pool.Query(ctx, `SELECT uuid, COALESCE(driver_internal_info->>'console_holder', '')
		FROM nodes WHERE console_enabled AND conductor_group = $1 ORDER BY id`, group)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ConsoleHeld, error) {
		var c ConsoleHeld
		err := r.Scan(&c.NodeUUID, &c.Holder)
		return c, err
	})
	if err != nil {
		return nil, dbError(err, "list enabled consoles of conductor group %q", group)
	}
	return out, nil
}

// ClaimConsole records holder and its endpoints for the node's console only
// while the console is still enabled and held by previous (compare and
// swap: of two workers taking over the same console, one wins). It reports
// whether the claim was recorded.
func (s *Store) ClaimConsole(ctx context.Context, node, previous, holder string, endpoints map[string]any) (bool, error) {
	u, _ := canonicalUUID(node)
	kv := map[string]any{KeyConsoleHolder: holder}
	for k, v := range endpoints {
		kv[k] = v
	}
	tag, err := s.pool.Exec(ctx, `UPDATE nodes SET driver_internal_info = driver_internal_info || $3::jsonb, updated_at = now()
		WHERE uuid = $1 AND console_enabled AND COALESCE(driver_internal_info->>'console_holder', '') = $2`, u, previous, kv)
	if err != nil {
		return false, dbError(err, "claim the console of node %s", node)
	}
	return tag.RowsAffected() == 1, nil
}

// SetConsoleEnabled records console_enabled and, in the same statement,
// the console's holder and endpoints (enabled) or their removal
// (disabled), clearing last_error as Ironic's _set_console_mode does.
func (s *Store) SetConsoleEnabled(ctx context.Context, node string, enabled bool, held map[string]any) error {
	u, _ := canonicalUUID(node)
	if held == nil || !enabled {
		held = map[string]any{}
	}
	tag, err := s.pool.Exec(ctx, `UPDATE nodes SET console_enabled = $2, last_error = NULL,
		driver_internal_info = (driver_internal_info - $3::text[]) || $4::jsonb, updated_at = now()
		WHERE uuid = $1`, u, enabled, ConsoleKeys, held)
	if err != nil {
		return dbError(err, "record console_enabled of node %s", node)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("record console_enabled of node %s: %w", node, ErrNotFound)
	}
	return nil
}

// ConsoleToken is a stored console token: its hash only.
type ConsoleToken struct {
	NodeUUID  string
	Kind      string
	ExpiresAt time.Time
	Revoked   bool
}

// AddConsoleToken stores a token's hash bound to node and kind, and drops
// the tokens that expired more than a day ago (they answer as unknown
// either way; the day keeps a just-expired token's refusal explainable).
func (s *Store) AddConsoleToken(ctx context.Context, hash []byte, node, kind string, expires time.Time) error {
	u, _ := canonicalUUID(node)
	if _, err := s.pool.Exec(ctx, `INSERT INTO console_tokens (token_hash, node_uuid, kind, expires_at) VALUES ($1, $2, $3, $4)`,
		hash, u, kind, expires); err != nil {
		return dbError(err, "store a console token of node %s", node)
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM console_tokens WHERE expires_at < now() - interval '1 day'`); err != nil {
		return dbError(err, "prune console tokens")
	}
	return nil
}

// GetConsoleToken finds a token by its hash (ErrNotFound if unknown).
func (s *Store) GetConsoleToken(ctx context.Context, hash []byte) (*ConsoleToken, error) {
	t := &ConsoleToken{}
	err := s.pool.QueryRow(ctx, `SELECT node_uuid, kind, expires_at, revoked FROM console_tokens WHERE token_hash = $1`, hash).
		Scan(&t.NodeUUID, &t.Kind, &t.ExpiresAt, &t.Revoked)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("console token: %w", ErrNotFound)
	}
	if err != nil {
		return nil, dbError(err, "read console token")
	}
	return t, nil
}

// RevokeConsoleTokens revokes every token of the node.
func (s *Store) RevokeConsoleTokens(ctx context.Context, node string) error {
	u, _ := canonicalUUID(node)
	_, err := s.pool.Exec(ctx, `UPDATE console_tokens SET revoked = true WHERE node_uuid = $1 AND NOT revoked`, u)
	return dbError(err, "revoke the console tokens of node %s", node)
}

// AddConsoleWhereabouts writes, only when the node's console is enabled,
// a history event saying where its console is while the node waits in
// state (docs/console.md, "Consoles in the deploy timeline"): one
// statement that inserts nothing for a node without a console.
func (s *Store) AddConsoleWhereabouts(ctx context.Context, node, state, conductor string) error {
	u, _ := canonicalUUID(node)
	_, err := s.pool.Exec(ctx, `INSERT INTO node_history (uuid, node_uuid, severity, event_type, event, conductor, user_name)
		SELECT gen_random_uuid()::text, uuid, 'INFO', 'console',
			'Console of the node during ' || $2 || ': worker ' || COALESCE(driver_internal_info->>'console_holder', '(none yet)') ||
			COALESCE(', serial endpoint tcp://' || (driver_internal_info->>'console_address'), '') ||
			COALESCE(', graphical endpoint ' || (driver_internal_info->>'console_graphical_address'), ''),
			$3, ''
		FROM nodes WHERE uuid = $1 AND console_enabled`, u, state, conductor)
	return dbError(err, "record the console of node %s", node)
}

// ConsolesStillHeld answers which of nodes still have their console enabled
// and recorded as held by holder (a worker checks the endpoints it holds
// against it: a node deleted or taken over since is closed).
func (s *Store) ConsolesStillHeld(ctx context.Context, holder string, nodes []string) ([]string, error) {
	rows, _ := s.pool.Query(ctx, `SELECT uuid FROM nodes WHERE uuid = ANY($1) AND console_enabled
		AND driver_internal_info->>'console_holder' = $2`, nodes, holder)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, dbError(err, "read the consoles held by %s", holder)
	}
	return out, nil
}
