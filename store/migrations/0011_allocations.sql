-- Allocations (Ironic's API 1.52): a request for one available node of a
-- resource class, with traits, candidate nodes and an owner, that the
-- Allocate workflow fills by claiming a node (store/allocation.go). An
-- active allocation names its node (node_uuid) and the node names it back
-- (nodes.allocation_uuid) with its instance_uuid set to the allocation's
-- UUID, as Ironic's update_allocation writes both in one transaction.
-- Deleting a node deletes its allocations (Ironic's destroy_node);
-- deleting an allocation clears the node's allocation_uuid (the foreign
-- key) and the store clears its instance_uuid in the same transaction.

CREATE TABLE allocations (
    id              bigserial PRIMARY KEY,
    uuid            text NOT NULL,
    name            text,
    node_uuid       text REFERENCES nodes (uuid) ON DELETE CASCADE,
    state           text NOT NULL DEFAULT 'allocating',
    last_error      text,
    resource_class  text,
    candidate_nodes jsonb NOT NULL DEFAULT '[]',
    traits          jsonb NOT NULL DEFAULT '[]',
    extra           jsonb NOT NULL DEFAULT '{}',
    owner           text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz,
    CONSTRAINT allocations_uuid_key UNIQUE (uuid),
    CONSTRAINT allocations_name_key UNIQUE (name),
    CONSTRAINT allocations_node_uuid_key UNIQUE (node_uuid)
);
CREATE INDEX allocations_state_idx ON allocations (state, id);

ALTER TABLE nodes ADD COLUMN allocation_uuid text
    CONSTRAINT nodes_allocation_uuid_fkey REFERENCES allocations (uuid) ON DELETE SET NULL;
CREATE UNIQUE INDEX nodes_allocation_uuid_key ON nodes (allocation_uuid);
