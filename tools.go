//go:build tools

// Package ironflow pins the modules its packages use while they are being
// written, so that go.mod and go.sum hold them from the first commit.
package ironflow

import (
	_ "github.com/bougou/go-ipmi/pkg/client"
	_ "github.com/cavaliergopher/cpio"
	_ "github.com/diskfs/go-diskfs"
	_ "github.com/diskfs/go-diskfs/filesystem/iso9660"
	_ "github.com/gin-gonic/gin"
	_ "github.com/google/uuid"
	_ "github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	_ "github.com/insomniacslk/dhcp/dhcpv4/server4"
	_ "github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/klauspost/compress/zstd"
	_ "github.com/pin/tftp/v3"
	_ "github.com/stmcginnis/gofish"
	_ "go.temporal.io/sdk/client"
	_ "go.temporal.io/sdk/testsuite"
	_ "go.temporal.io/sdk/worker"
	_ "go.temporal.io/sdk/workflow"
	_ "golang.org/x/crypto/bcrypt"
)
