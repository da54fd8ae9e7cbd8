package store

import (
	"context"
	"time"
)

// Boot modes, methods and kinds of a BootConfig.
const (
	BootModeBIOS = "bios"
	BootModeUEFI = "uefi"

	BootMethodPXE    = "pxe"
	BootMethodVMedia = "vmedia"

	BootKindAgent    = "agent"
	BootKindRamdisk  = "ramdisk"
	BootKindAnaconda = "anaconda"
	BootKindInstance = "instance"
)

// BootConfig is what the PXE services may serve one node; a node without
// one gets nothing from them.
type BootConfig struct {
	NodeUUID     string    `json:"node_uuid" db:"node_uuid"`
	MACs         []string  `json:"macs" db:"macs"` // lowercase
	BootMode     string    `json:"boot_mode" db:"boot_mode"`
	Method       string    `json:"method" db:"method"`
	KernelURL    string    `json:"kernel_url" db:"kernel_url"`
	InitrdURL    string    `json:"initrd_url" db:"initrd_url"`
	KernelParams string    `json:"kernel_params" db:"kernel_params"`
	ISOPath      string    `json:"iso_path" db:"iso_path"`
	Kind         string    `json:"kind" db:"kind"`
	UpdatedAt    time.Time `json:"updated_at" db:"updated_at"`
}

// PutBootConfig creates or replaces the node's boot configuration. MACs are
// lowercased; an invalid MAC is ErrInvalidInput.
func (s *Store) PutBootConfig(ctx context.Context, c *BootConfig) error { panic("todo") }

// GetBootConfig returns the node's boot configuration or ErrNotFound.
func (s *Store) GetBootConfig(ctx context.Context, nodeUUID string) (*BootConfig, error) {
	panic("todo")
}

// BootConfigByMAC returns the boot configuration listing mac, or ErrNotFound.
func (s *Store) BootConfigByMAC(ctx context.Context, mac string) (*BootConfig, error) {
	panic("todo")
}

// DeleteBootConfig removes the node's boot configuration; no error if none.
func (s *Store) DeleteBootConfig(ctx context.Context, nodeUUID string) error { panic("todo") }
