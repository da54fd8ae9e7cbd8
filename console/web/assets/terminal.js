// The serial console page: xterm.js attached to /console/terminal/ws, the
// websocket the API bridges to the node's serial endpoint (docs/console.md).
// The page's own token is passed on to the websocket.
"use strict";
(function () {
  const token = new URLSearchParams(location.search).get("token") || "";
  const status = document.getElementById("status");
  function setState(state, text) {
    document.body.dataset.state = state;
    status.textContent = text;
  }
  const term = new Terminal({ convertEol: false, scrollback: 5000 });
  const fit = new FitAddon.FitAddon();
  term.loadAddon(fit);
  term.open(document.getElementById("console"));
  fit.fit();
  window.addEventListener("resize", () => fit.fit());
  // The page's test reads the terminal back through this.
  window.ironflowTerminal = term;

  const url = new URL("terminal/ws", location.href);
  url.protocol = location.protocol === "https:" ? "wss:" : "ws:";
  url.search = "?token=" + encodeURIComponent(token);
  const ws = new WebSocket(url.href);
  ws.addEventListener("open", () => {
    term.loadAddon(new AttachAddon.AttachAddon(ws));
    setState("connected", "connected");
    term.focus();
  });
  ws.addEventListener("close", (ev) => {
    setState("closed", "disconnected" + (ev.reason ? ": " + ev.reason : ""));
  });
})();
