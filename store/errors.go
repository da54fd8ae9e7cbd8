package store

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// uniqueErrors maps the unique constraints of migrations/*.sql to the typed
// errors callers match.
var uniqueErrors = map[string]error{
	"nodes_uuid_key":          ErrDuplicateUUID,
	"nodes_name_key":          ErrDuplicateName,
	"nodes_instance_uuid_key": ErrInstanceAssociated,
	"ports_uuid_key":          ErrDuplicateUUID,
	"ports_address_key":       ErrDuplicateMAC,
	"node_history_uuid_key":   ErrDuplicateUUID,
	"portgroups_uuid_key":     ErrDuplicateUUID,
	"portgroups_name_key":     ErrDuplicateName,
	"portgroups_address_key":  ErrDuplicateMAC,
	"chassis_uuid_key":        ErrDuplicateUUID,
	"ports_name_key":          ErrDuplicateName,
}

// foreignKeyErrors maps the foreign keys of migrations/*.sql whose
// violation names something else than a missing node.
var foreignKeyErrors = map[string]error{
	"nodes_chassis_uuid_fkey":   ErrChassisNotFound,
	"nodes_parent_node_fkey":    ErrParentNotFound,
	"ports_portgroup_uuid_fkey": ErrPortgroupNotFound,
}

// dbError wraps err with what was being done, translating the database's
// errors into the package's typed ones.
func dbError(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	what := fmt.Sprintf(format, args...)
	if IsUnavailable(err) && !errors.Is(err, ErrUnavailable) {
		return fmt.Errorf("%s: %w: %w", what, ErrUnavailable, err)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "23505": // unique_violation
			if typed, ok := uniqueErrors[pgErr.ConstraintName]; ok {
				return fmt.Errorf("%s: %w", what, typed)
			}
		case "23503": // foreign_key_violation: the referenced row is gone
			if typed, ok := foreignKeyErrors[pgErr.ConstraintName]; ok {
				return fmt.Errorf("%s: %w", what, typed)
			}
			return fmt.Errorf("%s: node: %w", what, ErrNotFound)
		case "23514", "22P02", "22023": // check_violation, invalid text, invalid parameter
			return fmt.Errorf("%s: %w: %s", what, ErrInvalidInput, pgErr.Message)
		}
	}
	return fmt.Errorf("%s: %w", what, err)
}
