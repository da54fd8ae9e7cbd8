package hardware

// ConsoleMethod is how a console interface reaches the machine's console
// (docs/console.md).
type ConsoleMethod string

// The console methods.
const (
	// ConsoleNone: no console (no-console refuses, as Ironic's).
	ConsoleNone ConsoleMethod = ""
	// ConsoleFake: an in-memory line that greets and echoes, for tests and
	// demonstrations (console.FakeSource).
	ConsoleFake ConsoleMethod = "fake"
	// ConsoleIPMISOL: the BMC's serial-over-LAN through ipmitool sol
	// activate under a pty, as Ironic's ipmitool consoles.
	ConsoleIPMISOL ConsoleMethod = "ipmi-sol"
	// ConsoleVNC: the BMC's graphical console, a VNC server at the
	// driver_info address KeyConsoleVNCAddress, relayed by the worker.
	ConsoleVNC ConsoleMethod = "vnc"
)

// What a console interface's console_info offers the user.
const (
	// ConsoleInfoSocat: {"type": "socat", "url": "tcp://host:port"}, the
	// worker's TCP endpoint itself (Ironic's ipmitool-socat).
	ConsoleInfoSocat = "socat"
	// ConsoleInfoShellinabox: a web terminal, the API's /console/terminal
	// page with a token (Ironic's ipmitool-shellinabox answers its
	// shellinabox server's URL under the same type).
	ConsoleInfoShellinabox = "shellinabox"
	// ConsoleInfoVNC: the API's /console/vnc page (noVNC) with a token.
	ConsoleInfoVNC = "vnc"
	// ConsoleInfoFake: fake's console_info names the TCP endpoint as
	// socat's does.
)

// Console keys of driver_info.
const (
	// KeyTerminalPort is Ironic's ipmi_terminal_port: the port of the
	// node's serial endpoint, instead of one of the worker's range.
	KeyTerminalPort = "ipmi_terminal_port"
	// KeyConsoleVNCAddress is the host:port of the BMC's VNC server that
	// redfish-graphical relays.
	KeyConsoleVNCAddress = "console_vnc_address"
)

// Console answers what a console interface does.
type Console interface {
	// Method is how the worker reaches the machine's console.
	Method() ConsoleMethod
	// InfoType is console_info's type.
	InfoType() string
}

type consoleBehaviour struct {
	method   ConsoleMethod
	infoType string
}

func (c consoleBehaviour) Method() ConsoleMethod { return c.method }
func (c consoleBehaviour) InfoType() string      { return c.infoType }

// ConsoleOf answers for a console interface. An unknown name has no
// console.
func ConsoleOf(name Interface) Console {
	return behaviourOf[Console](KindConsole, name, consoleBehaviour{})
}

var terminalPortKey = Key{Name: KeyTerminalPort, Description: "node's UDP port to connect to. Only required for console access. Optional."}

// declareConsoles adds the console interfaces to impls (declareImplementations).
func declareConsoles(implement func(kind Kind, name Interface, served string, needs Capability, behaviour any, keys ...Key)) {
	const endpoint = "console: an endpoint the worker holding the console listens on"
	implement(KindConsole, NoConsole, servedByNothing, "", consoleBehaviour{})
	implement(KindConsole, Fake, endpoint+", an in-memory line", "", consoleBehaviour{ConsoleFake, ConsoleInfoSocat})
	implement(KindConsole, IPMIToolSocat, endpoint+", bridged to ipmitool sol activate", "", consoleBehaviour{ConsoleIPMISOL, ConsoleInfoSocat}, terminalPortKey)
	implement(KindConsole, IPMIToolShellinabox, endpoint+", bridged to ipmitool sol activate; the API's web terminal", "", consoleBehaviour{ConsoleIPMISOL, ConsoleInfoShellinabox}, terminalPortKey)
	implement(KindConsole, RedfishGraphical, endpoint+", relayed to the BMC's VNC server; the API's noVNC page", "", consoleBehaviour{ConsoleVNC, ConsoleInfoVNC},
		Key{Name: KeyConsoleVNCAddress, Description: "host:port of the BMC's VNC server, relayed by the worker holding the console; without it the worker asks the BMC's Redfish Manager (docs/console.md). Optional."})
}
