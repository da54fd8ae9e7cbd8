-- UEFI HTTP boot (docs/bmcs-and-boot.md): the URL of the UEFI loader a node
-- whose boot interface is http-ipxe fetches; the DHCP service offers it to
-- the node's firmware. Empty for every other boot method.

ALTER TABLE boot_configs ADD COLUMN loader_url text NOT NULL DEFAULT '';
