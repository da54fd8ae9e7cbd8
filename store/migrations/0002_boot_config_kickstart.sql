-- The kickstart file an anaconda deploy (deploy_interface=anaconda) fetches
-- from the boot service at /boot/{uuid}/ks.cfg. It holds the node's agent
-- token, as Ironic's does, and is removed with the boot config.
ALTER TABLE boot_configs ADD COLUMN kickstart text NOT NULL DEFAULT '';
