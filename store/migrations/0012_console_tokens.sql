-- Console tokens (docs/console.md): the browser pages of a node's console
-- (/console/terminal, /console/vnc) are reached with a random token bound to
-- the node and the console kind, valid for a bounded time, as Ironic's
-- [vnc] token_timeout. Only the token's SHA-256 is stored; disabling the
-- console revokes every token of the node. Deleting a node deletes its
-- tokens.

CREATE TABLE console_tokens (
    token_hash  bytea PRIMARY KEY,
    node_uuid   text NOT NULL REFERENCES nodes (uuid) ON DELETE CASCADE,
    kind        text NOT NULL,
    expires_at  timestamptz NOT NULL,
    revoked     boolean NOT NULL DEFAULT false,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX console_tokens_node_idx ON console_tokens (node_uuid);
CREATE INDEX console_tokens_expiry_idx ON console_tokens (expires_at);
