// Package agent is ironflow's in-band ramdisk agent, compatible with the
// Ironic Python Agent protocol: it looks its node up on the ironflow API,
// heartbeats, and serves the IPA command API (deploy and clean steps, image
// writing with checksum verification, config drive, bootloader, erase).
//
// Everything that touches the machine goes through the Hardware interface:
// LinuxHardware drives real disks from /sys and /dev; agent/sim plugs in
// simulated hardware for tests and scale benchmarks while reusing the real
// lookup, heartbeat and command API code.
//
// The agent never logs or returns its agent token.
package agent
