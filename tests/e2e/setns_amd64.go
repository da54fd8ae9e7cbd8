package e2e

// sysSetns is setns(2) on linux/amd64; Go's syscall package lacks the
// constant there.
const sysSetns = 308
