// Package console owns the consoles of nodes, as Ironic's console
// interfaces do: on the worker side, the endpoints a worker process holds
// for each node whose console is enabled (Manager, Endpoint) and the
// streams they bridge to (the BMC's serial-over-LAN through Debian's
// ipmitool under a pty, a TCP serial or VNC address, a fake); on the API
// side, the tokens that let a browser page reach a node's endpoint
// (Tokens, which implements the Resolver of package console/web).
//
// What this package must never do: write console traffic, a token or a
// BMC password to a log, an error, a workflow history or the node's
// history. docs/console.md describes which process holds a console and
// how a URL reaches it.
package console
