package apiserver

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
)

// Microversions this API serves. The default when a request names none is
// the minimum, as Ironic (clients that predate microversions get 1.1).
const (
	MinVersionMinor = 1
	MaxVersionMinor = 115
)

// servedMaxMinor is the maximum negotiation serves: MaxVersionMinor, and
// only tests of versions implemented ahead of it (docs/api-versions.md)
// raise it, for the length of one test.
var servedMaxMinor = MaxVersionMinor

// Headers of microversion negotiation.
const (
	headerVersion    = "X-OpenStack-Ironic-API-Version"
	headerMinVersion = "X-OpenStack-Ironic-API-Minimum-Version"
	headerMaxVersion = "X-OpenStack-Ironic-API-Maximum-Version"
)

// Microversions that gate behaviour, named after Ironic's versions.py.
const (
	v2AvailableState    = 2
	v3DriverInternal    = 3
	v4ManageableState   = 4
	v5NodeName          = 5
	v6InspectState      = 6
	v7NodeClean         = 7
	v8FetchFields       = 8
	v9ProvisionFilter   = 9
	v11EnrollState      = 11
	v12RAIDConfig       = 12
	v13AbortVerb        = 13
	v14StateLinks       = 14
	v15ManualClean      = 15
	v16DriverFilter     = 16
	v17AdoptVerb        = 17
	v18PortInternalInfo = 18
	v19PortAdvanced     = 19
	v20NetworkIface     = 20
	v21ResourceClass    = 21
	v22Ramdisk          = 22
	v23Portgroups       = 23
	v24PortgroupSub     = 24
	v25UnsetChassis     = 25
	v26PortgroupMode    = 26
	v27SoftPower        = 27
	v28VIFs             = 28
	v29InjectNMI        = 29
	v30DynamicDrivers   = 30
	v31DynamicIfaces    = 31
	v32Volume           = 32
	v33StorageIface     = 33
	v34PhysicalNetwork  = 34
	v36AgentVersion     = 36
	v37Traits           = 37
	v38RescueIface      = 38
	v39InspectWait      = 39
	v40BIOSIface        = 40
	v42Fault            = 42
	v43NodeDetail       = 43
	v44DeployStep       = 44
	v45ResetInterfaces  = 45
	v46ConductorGroup   = 46
	v47AutomatedClean   = 47
	v48Protected        = 48
	v49Conductors       = 49
	v50Owner            = 50
	v51Description      = 51
	v52Allocation       = 52
	v53SmartNIC         = 53
	v54Events           = 54
	v56BuildConfigdrive = 56
	v59VendorData       = 59
	v61Retired          = 61
	v62AgentToken       = 62
	v63Indicators       = 63
	v64LLCNetworkType   = 64
	v65Lessee           = 65
	v66NetworkData      = 66
	v67VIFAttachPort    = 67
	v68AgentVerifyCA    = 68
	v69DeploySteps      = 69
	v70DisableRamdisk   = 70
	v72AgentStatus      = 72
	v73DeployVerbs      = 73
	v75BootMode         = 75
	v77DriverFields     = 77
	v78History          = 78
	v81Inventory        = 81
	v82Shard            = 82
	// 1.83 to 1.93: docs/api-versions.md says what each adds and whether
	// ironflow serves it.
	v83ParentChildNodes   = 83
	v84ContinueInspection = 84
	v85UnholdVerb         = 85
	v86FirmwareInterface  = 86
	// v87Service: the service verb, service_steps and the node's
	// service_step.
	v87Service            = 87
	v88PortName           = 88
	v89AttachDetachVmedia = 89
	v90OVNVtep            = 90
	v91DotJSON            = 91
	v93GetVmedia          = 93
	// 1.94 and 1.95: docs/api-versions.md.
	v94PortNodeIdent   = 94
	v95DisablePowerOff = 95
)

// Field, filter and header versions of 1.97 to 1.115 (docs/api-versions.md
// says what each adds), named after Ironic's versions.py.
const (
	v97PortDescription        = 97
	v98PatchEscapedKeys       = 98
	v99ConductorGroupsFilter  = 99
	v100PortVendor            = 100
	v101PortCategory          = 101
	v102PortgroupPhysnet      = 102
	v103PortgroupCategory     = 103
	v104NodeInstanceName      = 104
	v105RemoveOVNVtep         = 105
	v106PortgroupShard        = 106
	v107XOpenStackRequestID   = 107
	v108ServiceDisableRamdisk = 108
	v109NodeHealth            = 109
	v110DeployWaitAbort       = 110
	v111DynamicPortgroup      = 111
	v112RunbookTraits         = 112
	v113NodeHistoryProject    = 113
	v114FirmwareIdentity      = 114
	v115NodeHistoryFields     = 115
)

func versionString(minor int) string { return "1." + strconv.Itoa(minor) }

// negotiate parses the request's microversion header. ok is false with the
// description of Ironic's 406 when the version is unusable; rangeHeaders says
// whether that 406 still carries the min/max headers (Ironic omits them for
// a header that does not parse).
func negotiate(h string) (minor int, desc string, rangeHeaders bool, ok bool) {
	h = strings.TrimSpace(h)
	if h == "" {
		return MinVersionMinor, "", true, true
	}
	if strings.EqualFold(h, "latest") {
		return servedMaxMinor, "", true, true
	}
	majS, minS, found := strings.Cut(h, ".")
	maj, err1 := strconv.Atoi(majS)
	mnr, err2 := strconv.Atoi(minS)
	if !found || err1 != nil || err2 != nil || maj < 0 || mnr < 0 || len(h) > 16 {
		return 0, "Invalid value for X-OpenStack-Ironic-API-Version header", false, false
	}
	rangeText := fmt.Sprintf("The supported version range is: [%s, %s].", versionString(MinVersionMinor), versionString(servedMaxMinor))
	asked := strconv.Itoa(maj) + "." + strconv.Itoa(mnr)
	if maj != 1 {
		return 0, fmt.Sprintf("Mutually exclusive versions requested. Version %s requested but not supported by this service. %s", asked, rangeText), true, false
	}
	if mnr < MinVersionMinor || mnr > servedMaxMinor {
		return 0, fmt.Sprintf("Version %s was requested but the minor version is not supported by this service. %s", asked, rangeText), true, false
	}
	return mnr, "", true, true
}

// versionMiddleware negotiates the microversion of every /v1 request and sets
// the headers Ironic sets.
func versionMiddleware(c *gin.Context) {
	minor, desc, rangeHeaders, ok := negotiate(c.GetHeader(headerVersion))
	if rangeHeaders {
		c.Header(headerMinVersion, versionString(MinVersionMinor))
		c.Header(headerMaxVersion, versionString(servedMaxMinor))
	}
	if !ok {
		writeRaw(c, http.StatusNotAcceptable, versionErrorBody(desc))
		return
	}
	c.Header(headerVersion, versionString(minor))
	c.Set(ctxVersion, minor)
	c.Next()
}

// ver is the negotiated minor version of the request.
func ver(c *gin.Context) int {
	if v, ok := c.Get(ctxVersion); ok {
		return v.(int)
	}
	return MinVersionMinor
}

// link is Ironic's {href, rel} link.
type link struct {
	Href string `json:"href"`
	Rel  string `json:"rel"`
	Type string `json:"type,omitempty"`
}

// selfLinks are Ironic's self + bookmark links of a resource path such as
// "nodes/<uuid>".
func selfLinks(base, path string) []link {
	return []link{{Href: base + "/v1/" + path, Rel: "self"}, {Href: base + "/" + path, Rel: "bookmark"}}
}

func versionObject(base string) map[string]any {
	return map[string]any{
		"id":          "v1",
		"links":       []link{{Href: base + "/v1/", Rel: "self"}},
		"status":      "CURRENT",
		"min_version": versionString(MinVersionMinor),
		"version":     versionString(servedMaxMinor),
	}
}

// rootDocument answers GET /: version discovery, no authentication.
func (s *server) rootDocument(c *gin.Context) error {
	base := s.baseURL(c)
	v := versionObject(base)
	c.JSON(http.StatusOK, map[string]any{
		"name":            "OpenStack Ironic API",
		"description":     "Ironic is an OpenStack project which enables the provision and management of baremetal machines.",
		"default_version": v,
		"versions":        []any{v},
	})
	return nil
}

// v1Document answers GET /v1 with the links of the resources the version
// serves: those the route table indexes under /v1.
func (s *server) v1Document(c *gin.Context) error {
	base := s.baseURL(c)
	doc := map[string]any{
		"id": "v1",
		"links": []link{
			{Href: base + v1Root + "/", Rel: "self"},
			{Href: "https://docs.openstack.org//ironic/latest/contributor//webapi.html", Rel: "describedby", Type: "text/html"},
		},
		"media_types": map[string]string{"base": "application/json", "type": "application/vnd.openstack.ironic.v1+json"},
		"version":     versionObject(base),
	}
	for _, name := range s.indexed(v1Root, ver(c)) {
		doc[name] = []link{{Href: base + v1Root + "/" + name + "/", Rel: "self"}, {Href: base + "/" + name + "/", Rel: "bookmark"}}
	}
	c.JSON(http.StatusOK, doc)
	return nil
}
