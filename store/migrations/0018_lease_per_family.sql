-- A MAC holds one lease per address family: DHCPv4's and DHCPv6's on a
-- dual-stack provisioning segment (docs/bmcs-and-boot.md, "IPv6
-- provisioning networks") no longer replace each other.

ALTER TABLE dhcp_leases ADD COLUMN family smallint GENERATED ALWAYS AS (family(ip)) STORED;
ALTER TABLE dhcp_leases DROP CONSTRAINT dhcp_leases_pkey;
ALTER TABLE dhcp_leases ADD PRIMARY KEY (mac, family);
