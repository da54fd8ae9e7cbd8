// Package web is the browser side of ironflow's node consoles, served by the
// API process (docs/console.md, "Browser and graphical console"):
//
//	GET /console/terminal?token=T      xterm.js page for a serial console
//	GET /console/terminal/ws?token=T   websocket bridged to the node's serial endpoint
//	GET /console/vnc?token=T           noVNC page for a graphical console
//	GET /console/vnc/ws?token=T        binary websocket bridged to the node's RFB endpoint
//	GET /console/assets/...            the pages' scripts (xterm.js is vendored, embedded)
//	GET /console/novnc/...             Debian's novnc files, read at run time
//
// A token names a node and a console kind; a Resolver (the console package,
// on the store) turns it into the TCP address of the endpoint the worker keeps
// for that node. The package owns the websocket to TCP bridges and nothing
// else: it never stores tokens, never logs a token or a byte of console
// traffic, and never dials anything but the address a Resolver returned.
package web
