-- API 1.40/1.74: a node's BIOS settings as the bios interface last read
-- them (Ironic's bios_settings table), with the fields of the BMC's
-- attribute registry. Numbered 0010 to leave 0009 to the firmware
-- components of the same wave.

CREATE TABLE bios_settings (
    node_uuid        text NOT NULL REFERENCES nodes (uuid) ON DELETE CASCADE,
    name             text NOT NULL,
    value            text NOT NULL DEFAULT '',
    attribute_type   text,
    allowable_values jsonb,
    lower_bound      bigint,
    upper_bound      bigint,
    min_length       bigint,
    max_length       bigint,
    read_only        boolean,
    reset_required   boolean,
    is_unique        boolean,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz,
    PRIMARY KEY (node_uuid, name)
);
