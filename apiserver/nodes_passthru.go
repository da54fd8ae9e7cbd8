package apiserver

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/gin-gonic/gin"
	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/pyliteral"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// Vendor passthru (API 1.1, Ironic's API reference "Node Vendor Passthru"
// and "Driver Vendor Passthru"): a client calls a method of the node's
// vendor interface with ?method=NAME and any HTTP method the method
// declares; GET .../methods lists them (hardware/vendor.go). Ironic's
// checks come first, in its words (ironic/api/controllers/v1/utils.py
// vendor_passthru, ironic/conductor/manager.py vendor_passthru, the
// interface's validate); a method that reaches the BMC then runs in the
// VendorPassthru workflow (workflows/passthru.go) that holds the node's
// lock, and the API answers with its return value: 200 for a synchronous
// method, 202 for an asynchronous one.

// listVendorMethods answers GET /v1/nodes/{node}/vendor_passthru/methods.
func (s *server) listVendorMethods(c *gin.Context, n *store.Node) error {
	writeJSON(c, http.StatusOK, hardware.VendorOf(hardware.Interface(n.VendorInterface)).Methods())
	return nil
}

// callVendorMethod answers /v1/nodes/{node}/vendor_passthru?method=NAME
// and /v1/nodes/{node}/vendor_passthru/NAME.
func (s *server) callVendorMethod(c *gin.Context, n *store.Node) error {
	name := vendorMethodName(c)
	if name == "" {
		return missingVendorMethod()
	}
	args, err := decodeObject(c)
	if err != nil {
		return err
	}
	vendor := hardware.VendorOf(hardware.Interface(n.VendorInterface))
	m, err := vendorMethod(vendor.Methods(), name, c.Request.Method)
	if err != nil {
		return err
	}
	if vendor.TouchesNoHardware() {
		return fakeVendorCall(c, name, m, args)
	}
	if err := validateVendorArgs(name, args); err != nil {
		return err
	}
	req := workflows.VendorPassthruRequest{NodeUUID: n.UUID, ConductorGroup: n.ConductorGroup, Method: name,
		HTTPMethod: strings.ToUpper(c.Request.Method), Args: args}
	// create_subscription's HttpHeaders are the destination's credential:
	// they wait in the node's driver_internal_info (a key every view
	// masks) for the activity, which removes them, and never enter the
	// workflow's history.
	if headers, ok := args["HttpHeaders"]; ok && name == hardware.VendorCreateSubscription {
		req.SecretKey = "vendor_passthru_secret_" + randomHex(8)
		delete(args, "HttpHeaders")
		if err := s.store.MergeDriverInternalInfo(c.Request.Context(), n.UUID, map[string]any{req.SecretKey: headers}); err != nil {
			return fmt.Errorf("keep the HttpHeaders of node %s: %w", n.UUID, err)
		}
		defer func() {
			// Gone whatever happened, should the workflow never have run.
			_ = s.store.DeleteDriverInternalInfoKeys(c.Request.Context(), n.UUID, req.SecretKey)
		}()
	}
	out, err := s.eng.VendorPassthru(c.Request.Context(), req)
	var app *temporal.ApplicationError
	switch {
	case errors.Is(err, ErrNodeLocked):
		return nodeLocked(n.UUID, lockHolder(n))
	case errors.As(err, &app):
		status := map[string]int{workflows.ErrTypeVendorInvalid: http.StatusBadRequest,
			workflows.ErrTypeVendorNotFound: http.StatusNotFound}[app.Type()]
		if status == 0 {
			status = http.StatusInternalServerError
		}
		return errorf(status, "%s", app.Message())
	case err != nil:
		return fmt.Errorf("vendor passthru %s on node %s: %w", name, n.UUID, err)
	}
	writePassthru(c, m, out)
	return nil
}

// vendorMethodName is the method of ?method=, or the path segment after
// vendor_passthru (Ironic's controller takes both; python-ironicclient
// sends the segment).
func vendorMethodName(c *gin.Context) string {
	if m := c.Query("method"); m != "" {
		return m
	}
	return c.Param("method")
}

// writePassthru answers as Ironic's vendor_passthru: 202 and no body for
// an asynchronous method, else 200 with the return value as JSON (no body
// when it returned nothing).
func writePassthru(c *gin.Context, m hardware.VendorMethod, out any) {
	switch {
	case m.Async:
		writeEmpty(c, http.StatusAccepted, "")
	case out == nil:
		writeEmpty(c, http.StatusOK, "")
	default:
		writeJSON(c, http.StatusOK, out)
	}
}

// vendorMethod finds the method and checks the HTTP method, as Ironic's
// conductor does before anything else.
func vendorMethod(methods map[string]hardware.VendorMethod, name, httpMethod string) (hardware.VendorMethod, error) {
	m, ok := methods[name]
	if !ok {
		return m, badRequest("No handler for method %s", name)
	}
	httpMethod = strings.ToUpper(httpMethod)
	for _, h := range m.HTTPMethods {
		if h == httpMethod {
			return m, nil
		}
	}
	return m, badRequest("The method %s does not support HTTP %s", name, httpMethod)
}

// fakeVendorCall runs a method of the fake vendor interface (Ironic's
// FakeVendorB): bar is required, and the answer is whether it is the
// method's word. Nothing reaches hardware, so the API answers itself.
func fakeVendorCall(c *gin.Context, name string, m hardware.VendorMethod, args map[string]any) error {
	bar, ok := args["bar"]
	if !ok || !pyliteral.Truthy(bar) {
		return badRequest("Parameter 'bar' not passed to method '%s'.", name)
	}
	writePassthru(c, m, bar == hardware.FakeVendorWords[name])
	return nil
}

// validateVendorArgs is the redfish vendor interface's validate
// (ironic/drivers/modules/redfish/vendor.py) for what needs no BMC; the
// event types the BMC takes are checked by the activity.
func validateVendorArgs(name string, args map[string]any) error {
	switch name {
	case hardware.VendorCreateSubscription:
		if v, ok := args["Context"]; ok {
			if _, isStr := v.(string); !isStr {
				return badRequest("Context %s is not a valid string", pyliteral.Str(v))
			}
		}
		if v, ok := args["Protocol"]; ok {
			if _, isStr := v.(string); !isStr {
				return badRequest("Protocol %s is not a string", pyliteral.Str(v))
			}
		}
		if v, ok := args["HttpHeaders"]; ok && v != nil {
			if _, isList := v.([]any); !isList {
				return badRequest("HttpHeaders %s is not a list of headers", pyliteral.Str(v))
			}
		}
		if dest, ok := args["Destination"].(string); !ok || !validURI(dest) {
			return badRequest("Destination %s is not a valid URI", pyliteral.Str(args["Destination"]))
		}
	case hardware.VendorDeleteSubscription:
		id, _ := args["id"].(string)
		if !pyliteral.Truthy(args["id"]) {
			return badRequest("id can't be None")
		}
		if !validSubscriptionID(id) {
			return badRequest("Invalid BMC subscription ID value: '%s'", pyliteral.Str(args["id"]))
		}
	case hardware.VendorGetSubscription:
		// Ironic fails a missing id with a Python TypeError (500); a
		// client's mistake is a 400 here, in the words of a bad one.
		if id, ok := args["id"].(string); !ok || !validSubscriptionID(id) {
			return badRequest("Invalid BMC ID value: '%s'", pyliteral.Str(args["id"]))
		}
	}
	return nil
}

// urlIllegal are the characters Ironic refuses in a subscription id
// (ironic/common/validate.py: RFC 1738's extra, national and punctuation
// characters), and ".." could climb the BMC's paths.
const urlIllegal = "!*'(),{}|\\^~[]`<>#%\""

func validSubscriptionID(id string) bool {
	return !strings.ContainsAny(id, urlIllegal) && !strings.Contains(id, "..")
}

// RFC 3986 (appendix B splits a reference; section 3 gives each part's
// characters), as the rfc3986 validator Ironic uses: a scheme and a host
// are required, and every part must be valid.
var (
	uriParts    = regexp.MustCompile(`^(?:([^:/?#]+):)?(?://([^/?#]*))?([^?#]*)(?:\?([^#]*))?(?:#(.*))?$`)
	uriScheme   = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*$`)
	uriUserinfo = regexp.MustCompile(`^(?:[A-Za-z0-9\-._~!$&'()*+,;=:]|%[0-9A-Fa-f]{2})*$`)
	uriRegName  = regexp.MustCompile(`^(?:[A-Za-z0-9\-._~!$&'()*+,;=]|%[0-9A-Fa-f]{2})+$`)
	uriIPv6     = regexp.MustCompile(`^\[[0-9A-Fa-f:.]+\]$`)
	uriPort     = regexp.MustCompile(`^[0-9]*$`)
	uriPchars   = regexp.MustCompile(`^(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/?]|%[0-9A-Fa-f]{2})*$`)
)

func validURI(s string) bool {
	p := uriParts.FindStringSubmatch(s)
	if p == nil || p[1] == "" || !uriScheme.MatchString(p[1]) || p[2] == "" {
		return false
	}
	host := p[2]
	if i := strings.LastIndex(host, "@"); i >= 0 {
		if !uriUserinfo.MatchString(host[:i]) {
			return false
		}
		host = host[i+1:]
	}
	if i := strings.LastIndex(host, ":"); i >= 0 && !strings.HasSuffix(host, "]") {
		if !uriPort.MatchString(host[i+1:]) {
			return false
		}
		host = host[:i]
	}
	if !uriRegName.MatchString(host) && !uriIPv6.MatchString(host) {
		return false
	}
	for _, part := range p[3:] {
		if !uriPchars.MatchString(part) {
			return false
		}
	}
	return true
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// listDriverVendorMethods answers GET
// /v1/drivers/{driver}/vendor_passthru/methods: the driver methods of the
// hardware type's default vendor interface, as Ironic's conductor picks it.
func (s *server) listDriverVendorMethods(c *gin.Context) error {
	ht, ok := s.driver(c.Param("name"))
	if !ok {
		return unknownDriver(c.Param("name"))
	}
	writeJSON(c, http.StatusOK, hardware.VendorOf(ht.Default(hardware.KindVendor)).DriverMethods())
	return nil
}

// callDriverVendorMethod answers /v1/drivers/{driver}/vendor_passthru?method=.
// No vendor interface of ironflow's has driver methods, as none of
// Ironic's redfish, fake or no-vendor has: every call is "No handler".
func (s *server) callDriverVendorMethod(c *gin.Context) error {
	name := vendorMethodName(c)
	if name == "" {
		return missingVendorMethod()
	}
	ht, ok := s.driver(c.Param("name"))
	if !ok {
		return unknownDriver(c.Param("name"))
	}
	if _, err := decodeObject(c); err != nil {
		return err
	}
	_, err := vendorMethod(hardware.VendorOf(ht.Default(hardware.KindVendor)).DriverMethods(), name, c.Request.Method)
	return err
}

// missingVendorMethod is Ironic's answer to a passthru call without a
// method: its controllers take method as a mandatory argument, checked
// before the node or driver is looked up (requireVendorMethod).
func missingVendorMethod() error { return badRequest("Missing mandatory parameter: method") }

// requireVendorMethod answers a passthru call without a method before h
// looks the node up, as Ironic's controller does.
func requireVendorMethod(h handler) handler {
	return func(c *gin.Context) error {
		if vendorMethodName(c) == "" {
			return missingVendorMethod()
		}
		return h(c)
	}
}

// unknownDriver is Ironic's 404 for a driver no conductor has, as its hash
// ring says it on a driver's vendor passthru.
func unknownDriver(name string) error {
	return errorf(http.StatusNotFound, "The driver '%s' is unknown.", name)
}
