package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// table describes a resource's table for the code that lists, gets and
// deletes rows the same way for every resource: nodes, ports, port groups,
// chassis, volume connectors and targets.
type table struct {
	name     string            // the table: "ports"
	alias    string            // the alias its columns are read through ("p"), or ""
	join     string            // what the SELECT joins after the table, or ""
	what     string            // one row in errors: "port"
	whats    string            // rows in list errors: "ports"
	sortKeys map[string]string // the accepted sort keys
}

// col names a column of the table as its SELECT sees it.
func (t table) col(c string) string {
	if t.alias == "" {
		return c
	}
	return t.alias + "." + c
}

// from is the table with its alias: what the SELECT and the marker row read.
func (t table) from() string {
	if t.alias == "" {
		return t.name
	}
	return t.name + " " + t.alias
}

// selectSQL is "SELECT cols FROM table [alias] [join]".
func (t table) selectSQL(cols string) string {
	return "SELECT " + cols + " FROM " + t.from() + t.join
}

// page is a list's validated paging: sort expression, direction and marker
// comparison (see sortClause), and the marker as a canonical UUID.
type page struct {
	t                     table
	expr, dir, op, marker string
	limit                 int
}

// page validates a list's sort key and direction; the error says which
// list.
func (t table) page(limit int, marker, sortKey, sortDir string) (page, error) {
	expr, dir, op, err := sortClause(t.sortKeys, sortKey, sortDir)
	if err != nil {
		return page{}, fmt.Errorf("list %s: %w", t.whats, err)
	}
	if marker != "" {
		marker, _ = canonicalUUID(marker)
	}
	return page{t: t, expr: expr, dir: dir, op: op, marker: marker, limit: limit}, nil
}

// listPage runs the paged SELECT of cols with the filter conditions conds
// (arguments numbered from 1 in args). An empty page after a marker that
// names no row is ErrMarkerNotFound.
func listPage[T any](ctx context.Context, s *Store, p page, cols string, scan pgx.RowToFunc[*T], conds []string, args []any) ([]*T, error) {
	t := p.t
	q, args := pageQuery(t.selectSQL(cols), conds, args, t.from(), t.col("id"), p.expr, p.dir, p.op, p.marker, p.limit)
	rows, _ := s.pool.Query(ctx, q, args...)
	list, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return nil, dbError(err, "list %s", t.whats)
	}
	if len(list) == 0 && p.marker != "" {
		if err := s.checkMarker(ctx, t.name, p.marker); err != nil {
			return nil, fmt.Errorf("list %s: %w", t.whats, err)
		}
	}
	return list, nil
}

// where collects a list's filter conditions, numbering their arguments
// from 1.
type where struct {
	conds []string
	args  []any
}

// eq adds "col = v".
func (w *where) eq(col string, v any) {
	w.args = append(w.args, v)
	w.conds = append(w.conds, fmt.Sprintf("%s = $%d", col, len(w.args)))
}

// project adds "(n.owner = p OR n.lessee = p)" unless p is empty: the
// objects of the nodes a project owns or leases (Ironic's project filter).
func (w *where) project(alias, p string) {
	if p != "" {
		w.args = append(w.args, p)
		w.conds = append(w.conds, fmt.Sprintf("(%[1]sowner = $%[2]d OR %[1]slessee = $%[2]d)", alias, len(w.args)))
	}
}

// conductorGroups adds "alias.conductor_group = ANY(groups)" unless groups
// is empty: the objects of nodes in those conductor groups (Ironic's
// conductor_groups filter of ports and port groups, API 1.99). Nodes store
// their group lowercase, so the groups are compared lowercase.
func (w *where) conductorGroups(alias string, groups []string) {
	if len(groups) == 0 {
		return
	}
	lower := make([]string, len(groups))
	for i, g := range groups {
		lower[i] = strings.ToLower(g)
	}
	w.args = append(w.args, lower)
	w.conds = append(w.conds, fmt.Sprintf("%sconductor_group = ANY($%d::text[])", alias, len(w.args)))
}

// shards adds "alias.shard = ANY(shards)" unless shards is empty.
func (w *where) shards(alias string, shards []string) {
	if len(shards) == 0 {
		return
	}
	w.args = append(w.args, shards)
	w.conds = append(w.conds, fmt.Sprintf("%sshard = ANY($%d::text[])", alias, len(w.args)))
}

// contains adds "col contains sub" (case-sensitive, as Ironic's
// description_contains) unless sub is empty.
func (w *where) contains(col, sub string) {
	if sub == "" {
		return
	}
	w.args = append(w.args, sub)
	w.conds = append(w.conds, fmt.Sprintf("strpos(%s, $%d) > 0", col, len(w.args)))
}

// uuid adds "col = u" with u canonical, unless u is empty.
func (w *where) uuid(col, u string) {
	if u != "" {
		c, _ := canonicalUUID(u)
		w.eq(col, c)
	}
}

// mac adds "col = a" with a normalized, unless a is empty; a malformed
// address is the caller's error.
func (w *where) mac(col, a string) error {
	if a == "" {
		return nil
	}
	m, err := NormalizeMAC(a)
	if err != nil {
		return err
	}
	w.eq(col, m)
	return nil
}

// getRow reads the row whose UUID is ident or, when byName and ident is no
// valid UUID, whose name is ident.
func getRow[T any](ctx context.Context, s *Store, t table, cols string, scan pgx.RowToFunc[*T], ident string, byName bool) (*T, error) {
	u, ok := canonicalUUID(ident)
	col, key := t.col("uuid"), u
	if byName && !ok {
		col, key = t.col("name"), ident
	}
	rows, _ := s.pool.Query(ctx, t.selectSQL(cols)+" WHERE "+col+" = $1", key)
	row, err := pgx.CollectExactlyOneRow(rows, scan)
	if err != nil {
		return nil, dbError(err, "get %s %s", t.what, ident)
	}
	return row, nil
}

// deleteByUUID deletes the row of table whose UUID is id; ErrNotFound if
// there is none.
func (s *Store) deleteByUUID(ctx context.Context, table, what, id string) error {
	u, _ := canonicalUUID(id)
	tag, err := s.pool.Exec(ctx, "DELETE FROM "+table+" WHERE uuid = $1", u)
	if err != nil {
		return dbError(err, "delete %s %s", what, id)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete %s %s: %w", what, id, ErrNotFound)
	}
	return nil
}

// newUUID fills a new row's empty UUID or canonicalises the one given.
func newUUID(u *string) error {
	if *u == "" {
		*u = uuid.NewString()
		return nil
	}
	c, ok := canonicalUUID(*u)
	if !ok {
		return fmt.Errorf("uuid %q: %w", *u, ErrInvalidInput)
	}
	*u = c
	return nil
}

// nonNil is m, or an empty map for the jsonb columns that are never NULL.
func nonNil(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// updateRow reads the row whose keyCol is key FOR UPDATE, lets fn change
// it and lets write store it, in one transaction. write gets the row as
// read (locked) and as fn left it, and returns it as stored. An error from
// fn aborts the update and is returned unwrapped; the others are worded
// "update <what> <ident>".
func updateRow[T any](ctx context.Context, s *Store, t table, cols string, scan pgx.RowToFunc[*T], ident, keyCol string, key any,
	fn func(row *T) error, write func(tx pgx.Tx, locked T, row *T) (*T, error)) (*T, error) {
	lock := t.selectSQL(cols) + " WHERE " + t.col(keyCol) + " = $1 FOR UPDATE"
	if t.alias != "" {
		lock += " OF " + t.alias
	}
	var out *T
	var fnErr error
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, _ := tx.Query(ctx, lock, key)
		row, err := pgx.CollectExactlyOneRow(rows, scan)
		if err != nil {
			return err
		}
		locked := *row
		if fnErr = fn(row); fnErr != nil {
			return fnErr
		}
		out, err = write(tx, locked, row)
		return err
	})
	if fnErr != nil {
		return nil, fnErr
	}
	if err != nil {
		return nil, dbError(err, "update %s %s", t.what, ident)
	}
	return out, nil
}

// createdForNode words the error of an INSERT ... SELECT ... FROM nodes n
// WHERE n.uuid = ...: no row means the node nodeUUID does not exist
// (ErrNotFound); others are worded "create <what> <uuid>".
func createdForNode(err error, what, uuid, nodeUUID string) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("create %s %s: node %s: %w", what, uuid, nodeUUID, ErrNotFound)
	}
	return dbError(err, "create %s %s", what, uuid)
}
