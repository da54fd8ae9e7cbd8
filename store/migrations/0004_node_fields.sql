-- Chassis (API 1.1), which nodes name by chassis_uuid, and the indexes of the
-- node list filters shard and chassis_uuid (API 1.82, 1.1). A chassis that
-- still has nodes cannot be deleted (Ironic's ChassisNotEmpty): the foreign
-- key restricts it. The nodes' traits and shard columns are in 0001.
CREATE TABLE chassis (
    id          bigserial PRIMARY KEY,
    uuid        text NOT NULL,
    description text,
    extra       jsonb NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz,
    CONSTRAINT chassis_uuid_key UNIQUE (uuid)
);

ALTER TABLE nodes ADD CONSTRAINT nodes_chassis_uuid_fkey
    FOREIGN KEY (chassis_uuid) REFERENCES chassis (uuid) ON DELETE RESTRICT;

CREATE INDEX nodes_chassis_uuid_idx ON nodes (chassis_uuid, id);
CREATE INDEX nodes_shard_idx ON nodes (shard, id);
