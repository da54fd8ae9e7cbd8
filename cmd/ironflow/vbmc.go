package main

import (
	"context"
	"os"

	"github.com/ironflow/ironflow/vbmc"
)

func runVBMC(ctx context.Context, args []string) error {
	return vbmc.Main(ctx, args, os.Stdout, os.Stderr)
}
