-- Fields of Ironic's API 1.97 to 1.115 (docs/api-versions.md):
-- ports: description (1.97), vendor (1.100), category (1.101),
-- available_for_dynamic_portgroup (1.111, true by default as Ironic's);
-- portgroups: physical_network (1.102), category (1.103),
-- dynamic_portgroup (1.111, read-only, false);
-- nodes: instance_name (1.104);
-- node_history: project (1.113), state, target_provision_state and
-- duration_seconds (1.115), null for the rows written before;
-- firmware_components: vendor, model, serial_number (1.114);
-- runbooks: description and traits (1.112).

ALTER TABLE ports
    ADD COLUMN description text,
    ADD COLUMN vendor text,
    ADD COLUMN category text,
    ADD COLUMN available_for_dynamic_portgroup boolean NOT NULL DEFAULT true;

ALTER TABLE portgroups
    ADD COLUMN physical_network text,
    ADD COLUMN category text,
    ADD COLUMN dynamic_portgroup boolean NOT NULL DEFAULT false;

ALTER TABLE nodes ADD COLUMN instance_name text;

ALTER TABLE node_history
    ADD COLUMN project text,
    ADD COLUMN state text,
    ADD COLUMN target_provision_state text,
    ADD COLUMN duration_seconds integer;

ALTER TABLE firmware_components
    ADD COLUMN vendor text,
    ADD COLUMN model text,
    ADD COLUMN serial_number text;

ALTER TABLE runbooks
    ADD COLUMN description text,
    ADD COLUMN traits text[] NOT NULL DEFAULT '{}';
