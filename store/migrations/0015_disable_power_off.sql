-- API 1.95: Ironic's disable_power_off, a node that must never be powered
-- off (docs/api-versions.md).

ALTER TABLE nodes ADD COLUMN disable_power_off boolean NOT NULL DEFAULT false;
