-- Volume connectors and targets (Ironic's API 1.32) and the conductors
-- (ironflow workers) that registered themselves (API 1.49). Constraint names
-- are matched in Go (volume.go) to map unique violations to typed errors.

CREATE TABLE volume_connectors (
    id           bigserial PRIMARY KEY,
    uuid         text NOT NULL,
    node_id      bigint NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
    type         text NOT NULL,
    connector_id text NOT NULL,
    extra        jsonb NOT NULL DEFAULT '{}',
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz,
    CONSTRAINT volume_connectors_uuid_key UNIQUE (uuid),
    -- Ironic's uniq_volumeconnectors0type0connector_id.
    CONSTRAINT volume_connectors_type_connector_id_key UNIQUE (type, connector_id)
);
CREATE INDEX volume_connectors_node_id_idx ON volume_connectors (node_id, id);

CREATE TABLE volume_targets (
    id          bigserial PRIMARY KEY,
    uuid        text NOT NULL,
    node_id     bigint NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
    volume_type text NOT NULL,
    properties  jsonb NOT NULL DEFAULT '{}',
    boot_index  bigint NOT NULL,
    volume_id   text NOT NULL,
    extra       jsonb NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz,
    CONSTRAINT volume_targets_uuid_key UNIQUE (uuid),
    -- Ironic's uniq_volumetargets0node_id0boot_index.
    CONSTRAINT volume_targets_node_id_boot_index_key UNIQUE (node_id, boot_index)
);
CREATE INDEX volume_targets_node_id_idx ON volume_targets (node_id, id);

-- One row per worker process, keyed by its hostname as Ironic's conductors
-- table is. updated_at is the heartbeat; online is false once the worker
-- stopped cleanly.
CREATE TABLE conductors (
    id               bigserial PRIMARY KEY,
    hostname         text NOT NULL,
    conductor_groups text[] NOT NULL DEFAULT '{}',
    drivers          text[] NOT NULL DEFAULT '{}',
    online           boolean NOT NULL DEFAULT true,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT conductors_hostname_key UNIQUE (hostname)
);
