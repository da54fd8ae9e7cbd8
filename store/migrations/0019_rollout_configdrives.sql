-- A rollout's config drive template (docs/rollouts.md, "Config drives"):
-- kept here rather than in the rollout's workflow history, since a config
-- drive may hold secrets in its user data. Each node's config drive is
-- rendered from it when the node's deploy starts; the row goes when the
-- rollout ends.

CREATE TABLE rollout_configdrives (
    rollout_uuid text PRIMARY KEY,
    template jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
