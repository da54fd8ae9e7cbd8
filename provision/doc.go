// Package provision is ironflow's provision vocabulary: the provision
// states, the verbs of PUT /v1/nodes/{node}/states/provision, the
// operations they start, Ironic's state machine between them (Accept),
// the step types and the step catalogue of the agent, and the request the
// API hands a provision workflow. The API, the store, the workflows and
// the agent share these words, typed, instead of strings.
//
// It is pure: it imports only the standard library, and must never do
// I/O or know of Temporal, the database or HTTP.
package provision
