-- API 1.83 and 1.88: a node's parent (Ironic's parent_node, the UUID of
-- another node; a parent's deletion leaves its children without one) and
-- the uniqueness of port names, which identify ports from 1.88 on as node
-- names identify nodes. Constraint names are matched in Go (errors.go).

ALTER TABLE nodes ADD COLUMN parent_node text;
ALTER TABLE nodes ADD CONSTRAINT nodes_parent_node_fkey
    FOREIGN KEY (parent_node) REFERENCES nodes (uuid) ON DELETE SET NULL;
CREATE INDEX nodes_parent_node_idx ON nodes (parent_node, id);

-- Case-sensitive, as Ironic's; NULL names do not collide.
ALTER TABLE ports ADD CONSTRAINT ports_name_key UNIQUE (name);
