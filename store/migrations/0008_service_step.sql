-- API 1.87: the service step a node runs (Ironic's node.service_step), {}
-- between steps as clean_step and deploy_step.

ALTER TABLE nodes ADD COLUMN service_step jsonb NOT NULL DEFAULT '{}'::jsonb;
