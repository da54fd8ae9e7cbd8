//go:build !linux

package agent

import (
	"context"
	"errors"
)

// ListenLLDP needs Linux packet sockets.
func ListenLLDP(context.Context, string) ([]byte, error) {
	return nil, errors.New("lldp collection needs Linux")
}
