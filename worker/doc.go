// Package worker wires a Temporal worker: which workflows and activities it
// registers, on which task queues (ironflow for workflows, ironflow.<group>
// for hardware activities), and with which options; and how the worker
// announces itself as a conductor (Announce: registration and heartbeats
// that GET /v1/conductors shows).
package worker
