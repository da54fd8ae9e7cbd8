-- ironflow inventory: nodes, ports, node history, boot configurations, DHCP
-- leases and node inventories. Constraint names are matched in Go to map
-- unique violations to typed errors: keep them in step with errors.go.

CREATE TABLE nodes (
    id                     bigserial PRIMARY KEY,
    uuid                   text NOT NULL,
    name                   text,
    driver                 text NOT NULL,
    bios_interface         text NOT NULL DEFAULT '',
    boot_interface         text NOT NULL DEFAULT '',
    console_interface      text NOT NULL DEFAULT '',
    deploy_interface       text NOT NULL DEFAULT '',
    firmware_interface     text NOT NULL DEFAULT '',
    inspect_interface      text NOT NULL DEFAULT '',
    management_interface   text NOT NULL DEFAULT '',
    network_interface      text NOT NULL DEFAULT '',
    power_interface        text NOT NULL DEFAULT '',
    raid_interface         text NOT NULL DEFAULT '',
    rescue_interface       text NOT NULL DEFAULT '',
    storage_interface      text NOT NULL DEFAULT '',
    vendor_interface       text NOT NULL DEFAULT '',
    provision_state        text NOT NULL,
    target_provision_state text,
    power_state            text,
    target_power_state     text,
    maintenance            boolean NOT NULL DEFAULT false,
    maintenance_reason     text,
    fault                  text,
    last_error             text,
    reservation            text,
    conductor_group        text NOT NULL DEFAULT '',
    resource_class         text,
    description            text,
    owner                  text,
    lessee                 text,
    automated_clean        boolean,
    protected              boolean NOT NULL DEFAULT false,
    protected_reason       text,
    retired                boolean NOT NULL DEFAULT false,
    retired_reason         text,
    instance_uuid          text,
    chassis_uuid           text,
    console_enabled        boolean NOT NULL DEFAULT false,
    boot_mode              text,
    secure_boot            boolean,
    shard                  text,
    traits                 text[] NOT NULL DEFAULT '{}',
    driver_info            jsonb NOT NULL DEFAULT '{}',
    driver_internal_info   jsonb NOT NULL DEFAULT '{}',
    instance_info          jsonb NOT NULL DEFAULT '{}',
    properties             jsonb NOT NULL DEFAULT '{}',
    extra                  jsonb NOT NULL DEFAULT '{}',
    clean_step             jsonb NOT NULL DEFAULT '{}',
    deploy_step            jsonb NOT NULL DEFAULT '{}',
    network_data           jsonb NOT NULL DEFAULT '{}',
    raid_config            jsonb NOT NULL DEFAULT '{}',
    target_raid_config     jsonb NOT NULL DEFAULT '{}',
    created_at             timestamptz NOT NULL DEFAULT now(),
    updated_at             timestamptz,
    provision_updated_at   timestamptz,
    inspection_started_at  timestamptz,
    inspection_finished_at timestamptz,
    CONSTRAINT nodes_uuid_key UNIQUE (uuid),
    -- Case-sensitive, as Ironic's; NULL names do not collide.
    CONSTRAINT nodes_name_key UNIQUE (name),
    CONSTRAINT nodes_instance_uuid_key UNIQUE (instance_uuid)
);

-- Filters and sort keys of GET /v1/nodes. Every sort index ends in id, the
-- tie-breaker of marker pagination; nullable sort keys are sorted through
-- COALESCE so that row comparisons with the marker never meet NULL.
CREATE INDEX nodes_provision_state_idx ON nodes (provision_state, id);
CREATE INDEX nodes_driver_idx ON nodes (driver, id);
CREATE INDEX nodes_conductor_group_idx ON nodes (conductor_group, id);
CREATE INDEX nodes_created_at_idx ON nodes (created_at, id);
CREATE INDEX nodes_updated_at_idx ON nodes ((COALESCE(updated_at, '-infinity'::timestamptz)), id);
CREATE INDEX nodes_provision_updated_at_idx ON nodes ((COALESCE(provision_updated_at, '-infinity'::timestamptz)), id);
CREATE INDEX nodes_name_sort_idx ON nodes ((COALESCE(name, '')), id);
CREATE INDEX nodes_resource_class_idx ON nodes ((COALESCE(resource_class, '')), id);
CREATE INDEX nodes_owner_idx ON nodes (owner) WHERE owner IS NOT NULL;
CREATE INDEX nodes_lessee_idx ON nodes (lessee) WHERE lessee IS NOT NULL;
CREATE INDEX nodes_fault_idx ON nodes (fault) WHERE fault IS NOT NULL;
CREATE INDEX nodes_maintenance_idx ON nodes (id) WHERE maintenance;

CREATE TABLE ports (
    id                    bigserial PRIMARY KEY,
    uuid                  text NOT NULL,
    address               text NOT NULL,
    node_id               bigint NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
    local_link_connection jsonb NOT NULL DEFAULT '{}',
    pxe_enabled           boolean NOT NULL DEFAULT true,
    physical_network      text,
    extra                 jsonb NOT NULL DEFAULT '{}',
    internal_info         jsonb NOT NULL DEFAULT '{}',
    is_smartnic           boolean NOT NULL DEFAULT false,
    name                  text,
    portgroup_uuid        text,
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz,
    CONSTRAINT ports_uuid_key UNIQUE (uuid),
    CONSTRAINT ports_address_key UNIQUE (address),
    CONSTRAINT ports_address_lowercase CHECK (address = lower(address))
);
CREATE INDEX ports_node_id_idx ON ports (node_id, id);
CREATE INDEX ports_created_at_idx ON ports (created_at, id);

CREATE TABLE node_history (
    id         bigserial PRIMARY KEY,
    uuid       text NOT NULL,
    node_uuid  text NOT NULL REFERENCES nodes (uuid) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    severity   text NOT NULL,
    event_type text NOT NULL,
    event      text NOT NULL,
    conductor  text NOT NULL DEFAULT '',
    user_name  text NOT NULL DEFAULT '',
    CONSTRAINT node_history_uuid_key UNIQUE (uuid)
);
CREATE INDEX node_history_node_idx ON node_history (node_uuid, id);

CREATE TABLE boot_configs (
    node_uuid     text PRIMARY KEY REFERENCES nodes (uuid) ON DELETE CASCADE,
    macs          text[] NOT NULL,
    boot_mode     text NOT NULL,
    method        text NOT NULL,
    kernel_url    text NOT NULL DEFAULT '',
    initrd_url    text NOT NULL DEFAULT '',
    kernel_params text NOT NULL DEFAULT '',
    iso_path      text NOT NULL DEFAULT '',
    kind          text NOT NULL,
    updated_at    timestamptz NOT NULL DEFAULT now()
);
-- Every DHCP/TFTP/HTTP boot request looks its config up by MAC.
CREATE INDEX boot_configs_macs_idx ON boot_configs USING gin (macs);

CREATE TABLE dhcp_leases (
    mac        text PRIMARY KEY,
    ip         inet NOT NULL,
    -- Leases outlive node deletion: the address stays taken until expiry.
    node_uuid  text REFERENCES nodes (uuid) ON DELETE SET NULL,
    expires_at timestamptz NOT NULL,
    CONSTRAINT dhcp_leases_ip_key UNIQUE (ip)
);

CREATE TABLE node_inventory (
    node_uuid   text PRIMARY KEY REFERENCES nodes (uuid) ON DELETE CASCADE,
    inventory   jsonb NOT NULL DEFAULT '{}',
    plugin_data jsonb NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT now()
);
