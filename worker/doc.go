// Package worker wires a Temporal worker: which workflows and activities it
// registers, on which task queues (ironflow for workflows, ironflow.<group>
// for hardware activities), and with which options.
package worker
