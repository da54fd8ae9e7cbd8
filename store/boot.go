package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Boot modes, methods and kinds of a BootConfig.
const (
	BootModeBIOS = "bios"
	BootModeUEFI = "uefi"

	BootMethodPXE    = "pxe"
	BootMethodVMedia = "vmedia"
	// BootMethodHTTPIPXE: UEFI HTTP boot of iPXE, then the node's iPXE
	// script (the http-ipxe boot interface); LoaderURL is set.
	BootMethodHTTPIPXE = "http-ipxe"

	BootKindAgent    = "agent"
	BootKindRamdisk  = "ramdisk"
	BootKindAnaconda = "anaconda"
	BootKindInstance = "instance"
)

// BootConfig is what the PXE services may serve one node; a node without
// one gets nothing from them.
type BootConfig struct {
	NodeUUID     string   `json:"node_uuid" db:"node_uuid"`
	MACs         []string `json:"macs" db:"macs"` // lowercase
	BootMode     string   `json:"boot_mode" db:"boot_mode"`
	Method       string   `json:"method" db:"method"`
	KernelURL    string   `json:"kernel_url" db:"kernel_url"`
	InitrdURL    string   `json:"initrd_url" db:"initrd_url"`
	KernelParams string   `json:"kernel_params" db:"kernel_params"`
	ISOPath      string   `json:"iso_path" db:"iso_path"`
	Kind         string   `json:"kind" db:"kind"`
	// Kickstart is the rendered kickstart of an anaconda deploy, served at
	// /boot/{uuid}/ks.cfg. It carries the agent token, so it is never
	// logged and never marshalled to JSON (which would put the token into
	// API output or Temporal history): the activity that renders it stores it.
	Kickstart string `json:"-" db:"kickstart"`
	// LoaderURL is the UEFI loader a node of BootMethodHTTPIPXE fetches.
	LoaderURL string    `json:"loader_url" db:"loader_url"`
	UpdatedAt time.Time `json:"updated_at" db:"updated_at"`
	// SecureBoot is the node's secure_boot (read, never written here): a
	// UEFI PXE boot of a node with secure boot on takes the signed chain.
	SecureBoot bool `json:"secure_boot"`
}

const bootColumns = "node_uuid, macs, boot_mode, method, kernel_url, initrd_url, kernel_params, iso_path, kind, kickstart, loader_url, updated_at"

// readBootColumns are bootColumns and the node's secure_boot.
const readBootColumns = bootColumns + ", COALESCE((SELECT n.secure_boot FROM nodes n WHERE n.uuid = boot_configs.node_uuid), false)"

func scanBootConfig(row pgx.CollectableRow) (*BootConfig, error) {
	c := &BootConfig{}
	err := row.Scan(&c.NodeUUID, &c.MACs, &c.BootMode, &c.Method, &c.KernelURL, &c.InitrdURL, &c.KernelParams, &c.ISOPath, &c.Kind, &c.Kickstart, &c.LoaderURL, &c.UpdatedAt, &c.SecureBoot)
	return c, err
}

// validateBootConfig normalises MACs and checks the enumerations, so that
// the PXE services never meet a value they cannot serve.
func validateBootConfig(c *BootConfig) error {
	macs := make([]string, 0, len(c.MACs))
	for _, m := range c.MACs {
		mac, err := NormalizeMAC(m)
		if err != nil {
			return err
		}
		macs = append(macs, mac)
	}
	c.MACs = macs
	switch c.BootMode {
	case BootModeBIOS, BootModeUEFI:
	default:
		return fmt.Errorf("boot mode %q: %w", c.BootMode, ErrInvalidInput)
	}
	switch c.Method {
	case BootMethodPXE, BootMethodVMedia, BootMethodHTTPIPXE:
	default:
		return fmt.Errorf("boot method %q: %w", c.Method, ErrInvalidInput)
	}
	switch c.Kind {
	case BootKindAgent, BootKindRamdisk, BootKindAnaconda, BootKindInstance:
	default:
		return fmt.Errorf("boot kind %q: %w", c.Kind, ErrInvalidInput)
	}
	c.NodeUUID, _ = canonicalUUID(c.NodeUUID)
	return nil
}

// PutBootConfig creates or replaces the node's boot configuration and sets
// c.UpdatedAt. MACs are lowercased; an invalid MAC, boot mode, method or
// kind is ErrInvalidInput; a missing node is ErrNotFound.
func (s *Store) PutBootConfig(ctx context.Context, c *BootConfig) error {
	if err := validateBootConfig(c); err != nil {
		return fmt.Errorf("put boot config of node %s: %w", c.NodeUUID, err)
	}
	err := s.pool.QueryRow(ctx, `INSERT INTO boot_configs (`+bootColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, now())
		ON CONFLICT (node_uuid) DO UPDATE SET macs = EXCLUDED.macs, boot_mode = EXCLUDED.boot_mode,
			method = EXCLUDED.method, kernel_url = EXCLUDED.kernel_url, initrd_url = EXCLUDED.initrd_url,
			kernel_params = EXCLUDED.kernel_params, iso_path = EXCLUDED.iso_path, kind = EXCLUDED.kind,
			kickstart = EXCLUDED.kickstart, loader_url = EXCLUDED.loader_url, updated_at = now()
		RETURNING updated_at`,
		c.NodeUUID, c.MACs, c.BootMode, c.Method, c.KernelURL, c.InitrdURL, c.KernelParams, c.ISOPath, c.Kind, c.Kickstart, c.LoaderURL,
	).Scan(&c.UpdatedAt)
	return dbError(err, "put boot config of node %s", c.NodeUUID)
}

// GetBootConfig returns the node's boot configuration or ErrNotFound.
func (s *Store) GetBootConfig(ctx context.Context, nodeUUID string) (*BootConfig, error) {
	node, _ := canonicalUUID(nodeUUID)
	rows, _ := s.pool.Query(ctx, "SELECT "+readBootColumns+" FROM boot_configs WHERE node_uuid = $1", node)
	c, err := pgx.CollectExactlyOneRow(rows, scanBootConfig)
	if err != nil {
		return nil, dbError(err, "get boot config of node %s", nodeUUID)
	}
	return c, nil
}

// BootConfigByMAC returns the boot configuration listing mac, or
// ErrNotFound. Should two list it, the newest wins. Served by the GIN index
// on macs: the PXE services call this on every request.
func (s *Store) BootConfigByMAC(ctx context.Context, mac string) (*BootConfig, error) {
	m, err := NormalizeMAC(mac)
	if err != nil {
		return nil, fmt.Errorf("boot config by MAC: %w", err)
	}
	rows, _ := s.pool.Query(ctx, "SELECT "+readBootColumns+` FROM boot_configs WHERE macs @> ARRAY[$1::text]
		ORDER BY updated_at DESC LIMIT 1`, m)
	c, err := pgx.CollectExactlyOneRow(rows, scanBootConfig)
	if err != nil {
		return nil, dbError(err, "boot config for MAC %s", m)
	}
	return c, nil
}

// DeleteBootConfig removes the node's boot configuration; no error if none.
func (s *Store) DeleteBootConfig(ctx context.Context, nodeUUID string) error {
	node, _ := canonicalUUID(nodeUUID)
	_, err := s.pool.Exec(ctx, "DELETE FROM boot_configs WHERE node_uuid = $1", node)
	return dbError(err, "delete boot config of node %s", nodeUUID)
}
