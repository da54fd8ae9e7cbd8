-- Deploy templates (Ironic's API 1.55) and runbooks (API 1.92), with their
-- steps in tables of their own as Ironic's models have them. A template's
-- or runbook's name is a trait: unique, matched against a node's instance
-- traits (templates) or traits (runbooks). Constraint names are matched in
-- Go (deploytemplate.go, runbook.go) to map unique violations to typed
-- errors.

CREATE TABLE deploy_templates (
    id         bigserial PRIMARY KEY,
    uuid       text NOT NULL,
    name       text NOT NULL,
    extra      jsonb NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz,
    CONSTRAINT deploy_templates_uuid_key UNIQUE (uuid),
    CONSTRAINT deploy_templates_name_key UNIQUE (name)
);

CREATE TABLE deploy_template_steps (
    id                 bigserial PRIMARY KEY,
    deploy_template_id bigint NOT NULL REFERENCES deploy_templates (id) ON DELETE CASCADE,
    interface          text NOT NULL,
    step               text NOT NULL,
    args               jsonb NOT NULL DEFAULT '{}',
    priority           integer NOT NULL CHECK (priority >= 0)
);
CREATE INDEX deploy_template_steps_template_idx ON deploy_template_steps (deploy_template_id, id);

CREATE TABLE runbooks (
    id              bigserial PRIMARY KEY,
    uuid            text NOT NULL,
    name            text NOT NULL,
    extra           jsonb NOT NULL DEFAULT '{}',
    public          boolean NOT NULL DEFAULT false,
    owner           text,
    disable_ramdisk boolean NOT NULL DEFAULT false,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz,
    CONSTRAINT runbooks_uuid_key UNIQUE (uuid),
    CONSTRAINT runbooks_name_key UNIQUE (name)
);

CREATE TABLE runbook_steps (
    id         bigserial PRIMARY KEY,
    runbook_id bigint NOT NULL REFERENCES runbooks (id) ON DELETE CASCADE,
    interface  text NOT NULL,
    step       text NOT NULL,
    args       jsonb NOT NULL DEFAULT '{}',
    "order"    integer NOT NULL CHECK ("order" >= 0)
);
CREATE INDEX runbook_steps_runbook_idx ON runbook_steps (runbook_id, id);
