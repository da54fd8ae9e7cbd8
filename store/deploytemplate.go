package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The unique constraints of migrations/0006_deploy_templates_runbooks.sql.
func init() {
	uniqueErrors["deploy_templates_uuid_key"] = ErrDuplicateUUID
	uniqueErrors["deploy_templates_name_key"] = ErrDuplicateName
	uniqueErrors["runbooks_uuid_key"] = ErrDuplicateUUID
	uniqueErrors["runbooks_name_key"] = ErrDuplicateName
}

// DeployStep is one step of a deploy template, with Ironic's keys.
type DeployStep struct {
	Interface string         `json:"interface"`
	Step      string         `json:"step"`
	Args      map[string]any `json:"args"`
	Priority  int            `json:"priority"`
}

// DeployTemplate is a named list of deploy steps (Ironic's deploy
// template); a deploy runs the steps of every template whose name is among
// the node's instance traits.
type DeployTemplate struct {
	ID        int64
	UUID      string
	Name      string
	Extra     map[string]any
	Steps     []DeployStep
	CreatedAt time.Time
	UpdatedAt *time.Time
}

// StepListFilter selects deploy templates or runbooks: paging only, as
// Ironic's lists of them.
type StepListFilter struct {
	Limit   int
	Marker  string // a template's or runbook's UUID
	SortKey string // see DeployTemplateSortKeys, RunbookSortKeys
	SortDir string
	// Project narrows a runbook list to the project's runbooks and the
	// public ones (Ironic's runbook list filter for a project-scoped
	// caller); deploy templates ignore it.
	Project string
}

// DeployTemplateSortKeys are the accepted sort keys: every column but extra
// and steps, as Ironic.
var DeployTemplateSortKeys = map[string]string{
	"id":         "t.id",
	"uuid":       "t.uuid",
	"name":       "t.name",
	"created_at": "t.created_at",
	"updated_at": "COALESCE(t.updated_at, '-infinity'::timestamptz)",
}

// templateColumns reads the steps with their template, in the order they
// were given.
const templateColumns = `t.id, t.uuid, t.name, t.extra,
	COALESCE((SELECT jsonb_agg(jsonb_build_object('interface', s.interface, 'step', s.step, 'args', s.args, 'priority', s.priority) ORDER BY s.id)
		FROM deploy_template_steps s WHERE s.deploy_template_id = t.id), '[]'::jsonb),
	t.created_at, t.updated_at`

var templateTable = table{name: "deploy_templates", alias: "t", what: "deploy template", whats: "deploy templates",
	sortKeys: DeployTemplateSortKeys}

func scanTemplate(row pgx.CollectableRow) (*DeployTemplate, error) {
	t := &DeployTemplate{}
	var steps []byte
	if err := row.Scan(&t.ID, &t.UUID, &t.Name, &t.Extra, &steps, &t.CreatedAt, &t.UpdatedAt); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(steps, &t.Steps); err != nil {
		return nil, fmt.Errorf("deploy template %s steps: %w", t.UUID, err)
	}
	return t, nil
}

// CreateDeployTemplate inserts t with its steps, filling UUID when empty,
// ID and CreatedAt. A second template of the same name is ErrDuplicateName.
func (s *Store) CreateDeployTemplate(ctx context.Context, t *DeployTemplate) error {
	if err := newUUID(&t.UUID); err != nil {
		return fmt.Errorf("create deploy template: %w", err)
	}
	t.Extra = nonNil(t.Extra)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `INSERT INTO deploy_templates (uuid, name, extra) VALUES ($1, $2, $3) RETURNING id, created_at`,
			t.UUID, t.Name, t.Extra).Scan(&t.ID, &t.CreatedAt)
		if err != nil {
			return err
		}
		return insertTemplateSteps(ctx, tx, t)
	})
	return dbError(err, "create deploy template %s", t.UUID)
}

func insertTemplateSteps(ctx context.Context, tx pgx.Tx, t *DeployTemplate) error {
	for _, st := range t.Steps {
		if _, err := tx.Exec(ctx, `INSERT INTO deploy_template_steps (deploy_template_id, interface, step, args, priority) VALUES ($1, $2, $3, $4, $5)`,
			t.ID, st.Interface, st.Step, nonNil(st.Args), st.Priority); err != nil {
			return err
		}
	}
	return nil
}

// GetDeployTemplate finds a template by UUID or name.
func (s *Store) GetDeployTemplate(ctx context.Context, ident string) (*DeployTemplate, error) {
	return getRow(ctx, s, templateTable, templateColumns, scanTemplate, ident, true)
}

// ListDeployTemplates returns a page of templates.
func (s *Store) ListDeployTemplates(ctx context.Context, f StepListFilter) ([]*DeployTemplate, error) {
	p, err := templateTable.page(f.Limit, f.Marker, f.SortKey, f.SortDir)
	if err != nil {
		return nil, err
	}
	return listPage(ctx, s, p, templateColumns, scanTemplate, nil, nil)
}

// DeployTemplatesByNames returns the templates whose names are in names,
// by name (Ironic's DeployTemplate.list_by_names).
func (s *Store) DeployTemplatesByNames(ctx context.Context, names []string) ([]*DeployTemplate, error) {
	if len(names) == 0 {
		return nil, nil
	}
	rows, _ := s.pool.Query(ctx, templateTable.selectSQL(templateColumns)+" WHERE t.name = ANY($1) ORDER BY t.name", names)
	list, err := pgx.CollectRows(rows, scanTemplate)
	if err != nil {
		return nil, dbError(err, "list deploy templates by name")
	}
	return list, nil
}

// UpdateDeployTemplate writes t's name, extra and steps over the stored
// template t.UUID and fills UpdatedAt.
func (s *Store) UpdateDeployTemplate(ctx context.Context, t *DeployTemplate) error {
	t.Extra = nonNil(t.Extra)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `UPDATE deploy_templates SET name = $2, extra = $3, updated_at = now() WHERE uuid = $1 RETURNING id, updated_at`,
			t.UUID, t.Name, t.Extra).Scan(&t.ID, &t.UpdatedAt)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM deploy_template_steps WHERE deploy_template_id = $1`, t.ID); err != nil {
			return err
		}
		return insertTemplateSteps(ctx, tx, t)
	})
	return dbError(err, "update deploy template %s", t.UUID)
}

// DeleteDeployTemplate deletes a template and its steps.
func (s *Store) DeleteDeployTemplate(ctx context.Context, uuid string) error {
	return s.deleteByUUID(ctx, "deploy_templates", "deploy template", uuid)
}
