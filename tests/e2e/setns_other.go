//go:build linux && !amd64

package e2e

import "syscall"

const sysSetns = syscall.SYS_SETNS
