// The graphical console page: noVNC's RFB client (Debian's novnc package,
// served under /console/novnc/) on /console/vnc/ws, the websocket the API
// bridges to the node's RFB endpoint (docs/console.md).
import RFB from "../novnc/core/rfb.js";

const token = new URLSearchParams(location.search).get("token") || "";
const status = document.getElementById("status");
function setState(state, text) {
  document.body.dataset.state = state;
  status.textContent = text;
}

const url = new URL("vnc/ws", location.href);
url.protocol = location.protocol === "https:" ? "wss:" : "ws:";
url.search = "?token=" + encodeURIComponent(token);

const rfb = new RFB(document.getElementById("screen"), url.href);
rfb.scaleViewport = false;
rfb.addEventListener("connect", () => setState("connected", "connected"));
rfb.addEventListener("disconnect", (e) =>
  setState("closed", e.detail.clean ? "disconnected" : "connection lost"));
rfb.addEventListener("credentialsrequired", () => {
  const password = window.prompt("VNC password");
  rfb.sendCredentials({ password: password || "" });
});
rfb.addEventListener("desktopname", (e) => {
  document.title = e.detail.name + " — ironflow graphical console";
});
window.ironflowRFB = rfb;
