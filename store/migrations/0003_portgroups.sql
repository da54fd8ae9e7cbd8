-- Port groups (Ironic's portgroups, API 1.23): a bond of a node's ports.
-- A port names its group by UUID (ports.portgroup_uuid); a group that still
-- has ports cannot be deleted (the API refuses it first, with Ironic's
-- message), and a node's groups go with the node.
CREATE TABLE portgroups (
    id                         bigserial PRIMARY KEY,
    uuid                       text NOT NULL,
    name                       text,
    address                    text,
    node_id                    bigint NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
    mode                       text NOT NULL DEFAULT 'active-backup',
    properties                 jsonb NOT NULL DEFAULT '{}',
    extra                      jsonb NOT NULL DEFAULT '{}',
    standalone_ports_supported boolean NOT NULL DEFAULT true,
    internal_info              jsonb NOT NULL DEFAULT '{}',
    created_at                 timestamptz NOT NULL DEFAULT now(),
    updated_at                 timestamptz,
    CONSTRAINT portgroups_uuid_key UNIQUE (uuid),
    CONSTRAINT portgroups_name_key UNIQUE (name),
    CONSTRAINT portgroups_address_key UNIQUE (address),
    CONSTRAINT portgroups_address_lowercase CHECK (address = lower(address))
);
CREATE INDEX portgroups_node_id_idx ON portgroups (node_id, id);

-- Ports that name no existing group are cleared before the reference is
-- enforced (ironflow accepted only null before this migration).
UPDATE ports SET portgroup_uuid = NULL WHERE portgroup_uuid IS NOT NULL;
ALTER TABLE ports ADD CONSTRAINT ports_portgroup_uuid_fkey
    FOREIGN KEY (portgroup_uuid) REFERENCES portgroups (uuid);
CREATE INDEX ports_portgroup_uuid_idx ON ports (portgroup_uuid) WHERE portgroup_uuid IS NOT NULL;
