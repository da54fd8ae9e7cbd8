-- Inspection rules (Ironic's API 1.96): conditions and actions kept as the
-- JSON lists the client sent, run by priority (highest first) after the
-- inspection hooks. The UUID constraint name is matched in Go
-- (inspectionrule.go) to map a duplicate to ErrDuplicateUUID.

CREATE TABLE inspection_rules (
    id          bigserial PRIMARY KEY,
    uuid        text NOT NULL,
    description text,
    phase       text NOT NULL DEFAULT 'main',
    priority    integer NOT NULL DEFAULT 0,
    sensitive   boolean NOT NULL DEFAULT false,
    conditions  jsonb NOT NULL DEFAULT '[]',
    actions     jsonb NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz,
    CONSTRAINT inspection_rules_uuid_key UNIQUE (uuid)
);
CREATE INDEX inspection_rules_phase_idx ON inspection_rules (phase, priority DESC, id);
