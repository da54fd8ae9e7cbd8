-- API 1.86: the firmware components of a node as the firmware interface
-- last read them (Ironic's firmware_information table).

CREATE TABLE firmware_components (
    node_uuid            text NOT NULL REFERENCES nodes (uuid) ON DELETE CASCADE,
    component            text NOT NULL,
    initial_version      text NOT NULL,
    current_version      text NOT NULL,
    last_version_flashed text,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz,
    PRIMARY KEY (node_uuid, component)
);
