-- Node health (Ironic's API 1.109, docs/api-versions.md): the BMC's
-- overall hardware health ("OK", "Warning", "Critical"), null when it is
-- unknown or the driver cannot read it. Only the power sync writes it.

ALTER TABLE nodes ADD COLUMN health text;
