package vbmc

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// Session limits of the Redfish service.
const (
	// DefaultSessionTimeout ends a session that has not been used for this
	// long; clients log in again on 401, as with real BMCs.
	DefaultSessionTimeout = 30 * time.Minute
	// DefaultMaxSessions caps concurrent sessions, as BMCs do.
	DefaultMaxSessions = 64
	// DefaultActionTimeout bounds one power, boot or media action.
	DefaultActionTimeout = 2 * time.Minute
)

const (
	redfishRoot     = "/redfish/v1"
	sessionsPath    = redfishRoot + "/SessionService/Sessions"
	resetAllowed    = "ResetType@Redfish.AllowableValues"
	targetAllowed   = "BootSourceOverrideTarget@Redfish.AllowableValues"
	enabledAllowed  = "BootSourceOverrideEnabled@Redfish.AllowableValues"
	modeAllowed     = "BootSourceOverrideMode@Redfish.AllowableValues"
	virtualMediaCd  = "Cd"
	redfishVersion  = "1.15.0"
	odataType       = "@odata.type"
	odataID         = "@odata.id"
	authTokenHeader = "X-Auth-Token"
)

var (
	resetTypes = []string{"On", "ForceOff", "GracefulShutdown", "GracefulRestart", "ForceRestart", "PowerCycle", "Nmi"}
	// BiosSetup and the others are left out: a VM cannot honour them.
	bootTargets  = []string{BootTargetNone, BootTargetPxe, BootTargetHdd, BootTargetCd, BootTargetUefiHTTP}
	bootEnabled  = []string{BootDisabled, BootOnce, BootContinuous}
	firmwareMode = map[string]string{FirmwareBIOS: "Legacy", FirmwareUEFI: "UEFI"}
)

// Server is the Redfish service for the VMs of one configuration.
type Server struct {
	cfg      Config
	log      *slog.Logger
	machines map[string]*Machine
	mux      *http.ServeMux
	updates  *updates // the UpdateService's tasks (update.go)
	events   *events  // the EventService's subscriptions (events.go)

	mu       sync.Mutex
	sessions map[string]*session // by id
	started  map[string]bool     // VMs this server powered on

	ctx    context.Context
	cancel context.CancelFunc
	bg     sync.WaitGroup
}

type session struct {
	id, token, user string
	lastUsed        time.Time
}

// NewServer builds the Redfish service. Close stops every QEMU it started.
func NewServer(cfg Config, log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	cfg.VMs = slices.Clone(cfg.VMs)
	if err := cfg.normalize(); err != nil {
		return nil, fmt.Errorf("vbmc config: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		cfg:      cfg,
		log:      log,
		machines: map[string]*Machine{},
		sessions: map[string]*session{},
		started:  map[string]bool{},
		ctx:      ctx,
		cancel:   cancel,
	}
	for _, vm := range s.cfg.VMs {
		s.machines[vm.Name] = newMachine(&s.cfg, vm, log)
	}
	s.routes()
	return s, nil
}

// Close stops background actions and powers off the VMs this server started.
func (s *Server) Close() error {
	s.cancel()
	s.bg.Wait()
	s.mu.Lock()
	names := make([]string, 0, len(s.started))
	for n := range s.started {
		names = append(names, n)
	}
	s.started = map[string]bool{}
	s.mu.Unlock()
	var errs []error
	for _, n := range names {
		ctx, cancel := context.WithTimeout(context.Background(), DefaultActionTimeout)
		errs = append(errs, s.machines[n].ForceOff(ctx))
		cancel()
	}
	return errors.Join(errs...)
}

func (s *Server) routes() {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /redfish", s.handleVersions)
	mux.HandleFunc("GET "+redfishRoot, s.handleRoot)
	mux.HandleFunc("GET "+redfishRoot+"/odata", s.handleOData)
	mux.HandleFunc("GET "+redfishRoot+"/SessionService", s.handleSessionService)
	mux.HandleFunc("GET "+sessionsPath, s.handleSessions)
	mux.HandleFunc("POST "+sessionsPath, s.handleLogin)
	mux.HandleFunc("GET "+sessionsPath+"/{id}", s.handleSession)
	mux.HandleFunc("DELETE "+sessionsPath+"/{id}", s.handleLogout)
	mux.HandleFunc("GET "+redfishRoot+"/Systems", s.handleSystems)
	mux.HandleFunc("GET "+redfishRoot+"/Systems/{id}", s.withMachine(s.handleSystem))
	mux.HandleFunc("PATCH "+redfishRoot+"/Systems/{id}", s.withMachine(s.handlePatchSystem))
	mux.HandleFunc("POST "+redfishRoot+"/Systems/{id}/Actions/ComputerSystem.Reset", s.withMachine(s.handleReset))
	mux.HandleFunc("POST "+redfishRoot+"/Systems/{id}/Actions/Oem/"+setHealthAction, s.withMachine(s.handleSetHealth)) // health.go
	s.routeSystemResources(mux)
	s.routeUpdateService(mux)
	s.routeStorage(mux)
	s.routeSensors(mux) // sensors.go
	s.routeEventService(mux)
	mux.HandleFunc("GET "+redfishRoot+"/Managers", s.handleManagers)
	mux.HandleFunc("GET "+redfishRoot+"/Managers/{id}", s.withMachine(s.handleManager))
	mux.HandleFunc("GET "+redfishRoot+"/Managers/{id}/VirtualMedia", s.withMachine(s.handleVirtualMedias))
	mux.HandleFunc("GET "+redfishRoot+"/Managers/{id}/VirtualMedia/{dev}", s.withCD(s.handleVirtualMedia))
	mux.HandleFunc("POST "+redfishRoot+"/Managers/{id}/VirtualMedia/{dev}/Actions/VirtualMedia.InsertMedia", s.withCD(s.handleInsertMedia))
	mux.HandleFunc("POST "+redfishRoot+"/Managers/{id}/VirtualMedia/{dev}/Actions/VirtualMedia.EjectMedia", s.withCD(s.handleEjectMedia))
	mux.HandleFunc("GET "+redfishRoot+"/Chassis", s.handleChassisCollection)
	mux.HandleFunc("GET "+redfishRoot+"/Chassis/{id}", s.withMachine(s.handleChassis))
	mux.HandleFunc("PATCH "+redfishRoot+"/Chassis/{id}", s.withMachine(s.handlePatchChassis)) // indicators.go
	s.biosRoutes(mux)                                                                         // BIOS, SecureBoot, Registries: bios.go
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "ResourceMissingAtURI", fmt.Sprintf("The resource at the URI %s was not found.", r.URL.Path))
	})
	s.mux = mux
}

// ServeHTTP authenticates the request (session token or basic auth; the
// service root and login are open, as the Redfish specification requires)
// and routes it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Clients follow links with and without a trailing slash.
	if p := strings.TrimSuffix(r.URL.Path, "/"); p != r.URL.Path && p != "" {
		r.URL.Path = p
	}
	w.Header().Set("OData-Version", "4.0")
	open := r.URL.Path == "/redfish" || r.URL.Path == redfishRoot || r.URL.Path == redfishRoot+"/odata" ||
		(r.Method == http.MethodPost && r.URL.Path == sessionsPath)
	if !open {
		user, ok := s.authenticate(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Basic realm="ironflow vbmc"`)
			writeError(w, http.StatusUnauthorized, "NoValidSession", "There is no valid session established with the implementation.")
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), userKey{}, user))
	}
	if s.resetting() {
		writeError(w, http.StatusServiceUnavailable, "ServiceTemporarilyUnavailable", "The management controller is resetting after a firmware update.")
		return
	}
	s.mux.ServeHTTP(w, r)
}

type userKey struct{}

func (s *Server) authenticate(r *http.Request) (string, bool) {
	if tok := r.Header.Get(authTokenHeader); tok != "" {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.expireSessions()
		for _, ss := range s.sessions {
			if subtle.ConstantTimeCompare([]byte(ss.token), []byte(tok)) == 1 {
				ss.lastUsed = time.Now()
				return ss.user, true
			}
		}
		return "", false
	}
	if u, p, ok := r.BasicAuth(); ok && s.checkPassword(u, p) {
		return u, true
	}
	return "", false
}

func (s *Server) checkPassword(user, password string) bool {
	okUser := subtle.ConstantTimeCompare([]byte(user), []byte(s.cfg.Username)) == 1
	okPass := subtle.ConstantTimeCompare([]byte(password), []byte(s.cfg.Password)) == 1
	return okUser && okPass
}

// expireSessions drops idle sessions; the caller holds s.mu.
func (s *Server) expireSessions() {
	for id, ss := range s.sessions {
		if time.Since(ss.lastUsed) > DefaultSessionTimeout {
			delete(s.sessions, id)
			s.log.Info("redfish session expired", "session", id, "user", ss.user)
		}
	}
}

func (s *Server) withMachine(h func(http.ResponseWriter, *http.Request, *Machine)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		m, ok := s.machines[r.PathValue("id")]
		if !ok {
			writeError(w, http.StatusNotFound, "ResourceMissingAtURI", fmt.Sprintf("The resource at the URI %s was not found.", r.URL.Path))
			return
		}
		h(w, r, m)
	}
}

// withCD is withMachine for the virtual media device: the CD is the only one.
func (s *Server) withCD(h func(http.ResponseWriter, *http.Request, *Machine)) http.HandlerFunc {
	return s.withMachine(func(w http.ResponseWriter, r *http.Request, m *Machine) {
		if r.PathValue("dev") != virtualMediaCd {
			writeError(w, http.StatusNotFound, "ResourceMissingAtURI", "No such virtual media device.")
			return
		}
		h(w, r, m)
	})
}

// decodeBody reads a small JSON request body, answering 400 when it is not JSON.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "MalformedJSON", "The request body submitted was malformed JSON.")
		return false
	}
	return true
}

// actionContext bounds an action by the server's life, not by the client's
// connection: a power action half done because a client hung up helps no one.
func (s *Server) actionContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(s.ctx, DefaultActionTimeout)
}

func (s *Server) handleVersions(w http.ResponseWriter, r *http.Request) {
	writeJSONResponse(w, http.StatusOK, map[string]any{"v1": redfishRoot + "/"})
}

func (s *Server) handleOData(w http.ResponseWriter, r *http.Request) {
	writeJSONResponse(w, http.StatusOK, map[string]any{
		"@odata.context": redfishRoot + "/$metadata",
		"value": []any{
			map[string]any{"name": "Service", "kind": "Singleton", "url": redfishRoot + "/"},
			map[string]any{"name": "Systems", "kind": "Singleton", "url": redfishRoot + "/Systems"},
			map[string]any{"name": "Managers", "kind": "Singleton", "url": redfishRoot + "/Managers"},
			map[string]any{"name": "Chassis", "kind": "Singleton", "url": redfishRoot + "/Chassis"},
			map[string]any{"name": "SessionService", "kind": "Singleton", "url": redfishRoot + "/SessionService"},
		},
	})
}

func (s *Server) handleRoot(w http.ResponseWriter, r *http.Request) {
	writeJSONResponse(w, http.StatusOK, map[string]any{
		odataID:          redfishRoot + "/",
		odataType:        "#ServiceRoot.v1_15_0.ServiceRoot",
		"Id":             "RootService",
		"Name":           "ironflow virtual BMC",
		"RedfishVersion": redfishVersion,
		"UUID":           nameUUID(":service"),
		"Systems":        link(redfishRoot + "/Systems"),
		"Managers":       link(redfishRoot + "/Managers"),
		"Chassis":        link(redfishRoot + "/Chassis"),
		"SessionService": link(redfishRoot + "/SessionService"),
		"Registries":     link(registriesPath),
		"UpdateService":  link(updateServicePath),
		"TaskService":    link(taskServicePath),
		"EventService":   link(eventServicePath),
		"Links":          map[string]any{"Sessions": link(sessionsPath)},
		"Vendor":         "ironflow",
	})
}

func (s *Server) handleSessionService(w http.ResponseWriter, r *http.Request) {
	writeJSONResponse(w, http.StatusOK, map[string]any{
		odataID:          redfishRoot + "/SessionService",
		odataType:        "#SessionService.v1_1_8.SessionService",
		"Id":             "SessionService",
		"Name":           "Session Service",
		"ServiceEnabled": true,
		"SessionTimeout": int(DefaultSessionTimeout / time.Second),
		"Sessions":       link(sessionsPath),
		"Status":         okStatus(),
	})
}

func (s *Server) handleSessions(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.expireSessions()
	var ids []string
	for id := range s.sessions {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	slices.Sort(ids)
	members := make([]string, len(ids))
	for i, id := range ids {
		members[i] = sessionsPath + "/" + id
	}
	writeJSONResponse(w, http.StatusOK, collection(sessionsPath, "#SessionCollection.SessionCollection", "Session Collection", members))
}

func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request) {
	var body struct {
		UserName string
		Password string
	}
	if !decodeBody(w, r, &body) {
		return
	}
	if !s.checkPassword(body.UserName, body.Password) {
		s.log.Warn("redfish login refused", "user", body.UserName, "remote", r.RemoteAddr)
		writeError(w, http.StatusUnauthorized, "InvalidCredentials", "The credentials provided are not valid.")
		return
	}
	ss := &session{id: randomHex(8), token: randomHex(16), user: body.UserName, lastUsed: time.Now()}
	s.mu.Lock()
	s.expireSessions()
	if len(s.sessions) >= DefaultMaxSessions {
		s.mu.Unlock()
		writeError(w, http.StatusServiceUnavailable, "SessionLimitExceeded", "The session establishment failed due to the number of simultaneous sessions exceeding the limit of the implementation.")
		return
	}
	s.sessions[ss.id] = ss
	s.mu.Unlock()
	s.log.Info("redfish session created", "session", ss.id, "user", ss.user, "remote", r.RemoteAddr)
	w.Header().Set(authTokenHeader, ss.token)
	w.Header().Set("Location", sessionsPath+"/"+ss.id)
	writeJSONResponse(w, http.StatusCreated, sessionJSON(ss))
}

func sessionJSON(ss *session) map[string]any {
	return map[string]any{
		odataID:    sessionsPath + "/" + ss.id,
		odataType:  "#Session.v1_3_0.Session",
		"Id":       ss.id,
		"Name":     "User Session",
		"UserName": ss.user,
	}
}

func (s *Server) handleSession(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	ss, ok := s.sessions[r.PathValue("id")]
	var body map[string]any
	if ok {
		body = sessionJSON(ss)
	}
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "ResourceMissingAtURI", "No such session.")
		return
	}
	writeJSONResponse(w, http.StatusOK, body)
}

func (s *Server) handleLogout(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.mu.Lock()
	ss, ok := s.sessions[id]
	delete(s.sessions, id)
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "ResourceMissingAtURI", "No such session.")
		return
	}
	s.log.Info("redfish session deleted", "session", id, "user", ss.user)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) memberPaths(prefix string) []string {
	out := make([]string, 0, len(s.cfg.VMs))
	for _, vm := range s.cfg.VMs {
		out = append(out, prefix+"/"+vm.Name)
	}
	return out
}

func (s *Server) handleSystems(w http.ResponseWriter, r *http.Request) {
	p := redfishRoot + "/Systems"
	writeJSONResponse(w, http.StatusOK, collection(p, "#ComputerSystemCollection.ComputerSystemCollection", "Computer System Collection", s.memberPaths(p)))
}

// bootETag changes when the writable part of a system (its boot override)
// changes, so that a client's PATCH with If-Match survives power changes.
func bootETag(b BootOverride) string {
	sum := sha256.Sum256([]byte(b.Target + "/" + b.Enabled + "/" + b.HTTPBootURI))
	return `W/"` + hex.EncodeToString(sum[:4]) + `"`
}

func (s *Server) systemJSON(ctx context.Context, m *Machine) (map[string]any, string, error) {
	power, err := m.PowerState(ctx)
	if err != nil {
		return nil, "", err
	}
	boot, err := m.Boot()
	if err != nil {
		return nil, "", err
	}
	p := redfishRoot + "/Systems/" + m.vm.Name
	etag := bootETag(boot)
	return map[string]any{
		odataID:        p,
		odataType:      "#ComputerSystem.v1_20_0.ComputerSystem",
		"@odata.etag":  etag,
		"Id":           m.vm.Name,
		"Name":         m.vm.Name,
		"SystemType":   "Virtual",
		"Manufacturer": "QEMU",
		"Model":        "Standard PC (Q35 + ICH9, 2009)",
		"SerialNumber": m.vm.Name,
		"UUID":         m.UUID(),
		"BiosVersion":  s.firmwareVersion(m, "BIOS"),
		"PowerState":   power,
		"IndicatorLED": m.indicator("system"), // indicators.go
		"Status":       m.systemStatus(),      // health.go
		"Boot": map[string]any{
			"BootSourceOverrideTarget":  boot.Target,
			targetAllowed:               bootTargets,
			"BootSourceOverrideEnabled": boot.Enabled,
			enabledAllowed:              bootEnabled,
			"BootSourceOverrideMode":    m.nextBootMode(), // bios.go
			modeAllowed:                 []string{"UEFI", "Legacy"},
			"HttpBootUri":               boot.HTTPBootURI,
		},
		"Bios":       link(p + "/Bios"),
		"SecureBoot": link(p + "/SecureBoot"),
		"MemorySummary": map[string]any{
			"TotalSystemMemoryGiB": float64(m.vm.MemoryMB) / 1024,
			"Status":               okStatus(),
		},
		"ProcessorSummary": map[string]any{
			"Count":                 m.vm.CPUs,
			"LogicalProcessorCount": m.vm.CPUs,
			"Model":                 "QEMU Virtual CPU",
			"Status":                okStatus(),
		},
		"EthernetInterfaces": link(p + "/EthernetInterfaces"),
		"Processors":         link(p + "/Processors"),
		"Memory":             link(p + "/Memory"),
		"SimpleStorage":      link(p + "/SimpleStorage"),
		"Storage":            link(p + "/Storage"),
		"Links": map[string]any{
			"Chassis":   []any{link(redfishRoot + "/Chassis/" + m.vm.Name)},
			"ManagedBy": []any{link(redfishRoot + "/Managers/" + m.vm.Name)},
		},
		"Actions": map[string]any{
			"#ComputerSystem.Reset": map[string]any{
				"target":     p + "/Actions/ComputerSystem.Reset",
				resetAllowed: resetTypes,
			},
			"Oem": healthActions(p), // health.go
		},
	}, etag, nil
}

func (s *Server) handleSystem(w http.ResponseWriter, r *http.Request, m *Machine) {
	body, etag, err := s.systemJSON(r.Context(), m)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "InternalError", err.Error())
		return
	}
	w.Header().Set("ETag", etag)
	writeJSONResponse(w, http.StatusOK, body)
}

func (s *Server) handlePatchSystem(w http.ResponseWriter, r *http.Request, m *Machine) {
	var body map[string]json.RawMessage
	if !decodeBody(w, r, &body) {
		return
	}
	for k := range body {
		if k != "Boot" && k != "IndicatorLED" {
			writeError(w, http.StatusBadRequest, "PropertyNotWritable", fmt.Sprintf("The property %s is a read only property and cannot be assigned a value.", k))
			return
		}
	}
	if raw, ok := body["IndicatorLED"]; ok {
		if !s.patchIndicatorLED(w, m, "system", raw) {
			return
		}
		if _, boot := body["Boot"]; !boot {
			s.handleSystem(w, r, m)
			return
		}
	}
	var patch struct {
		BootSourceOverrideTarget  *string
		BootSourceOverrideEnabled *string
		BootSourceOverrideMode    *string
		HTTPBootURI               *string `json:"HttpBootUri"`
	}
	if raw, ok := body["Boot"]; ok {
		if err := json.Unmarshal(raw, &patch); err != nil {
			writeError(w, http.StatusBadRequest, "PropertyValueTypeError", "Boot must be an object.")
			return
		}
	}
	cur, err := m.Boot()
	if err != nil {
		writeError(w, http.StatusInternalServerError, "InternalError", err.Error())
		return
	}
	if im := r.Header.Get("If-Match"); im != "" && !etagMatches(im, bootETag(cur)) {
		writeError(w, http.StatusPreconditionFailed, "PreconditionFailed", "The ETag supplied did not match the ETag required to change this resource.")
		return
	}
	if patch.BootSourceOverrideMode != nil && *patch.BootSourceOverrideMode != "UEFI" && *patch.BootSourceOverrideMode != "Legacy" {
		writeError(w, http.StatusBadRequest, "PropertyValueNotInList",
			fmt.Sprintf("The value %s for the property BootSourceOverrideMode is not in the list of acceptable values.", *patch.BootSourceOverrideMode))
		return
	}
	next := cur
	if patch.BootSourceOverrideTarget != nil {
		if !slices.Contains(bootTargets, *patch.BootSourceOverrideTarget) {
			writeError(w, http.StatusBadRequest, "PropertyValueNotInList", fmt.Sprintf("The value %s for the property BootSourceOverrideTarget is not in the list of acceptable values.", *patch.BootSourceOverrideTarget))
			return
		}
		next.Target = *patch.BootSourceOverrideTarget
		// A target without Enabled means "boot there next", as on most BMCs.
		if patch.BootSourceOverrideEnabled == nil && next.Enabled == BootDisabled {
			next.Enabled = BootOnce
		}
	}
	if patch.HTTPBootURI != nil {
		if u, err := url.Parse(*patch.HTTPBootURI); *patch.HTTPBootURI != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
			writeError(w, http.StatusBadRequest, "PropertyValueFormatError",
				fmt.Sprintf("The value %s for the property HttpBootUri is not an http or https URI.", *patch.HTTPBootURI))
			return
		}
		next.HTTPBootURI = *patch.HTTPBootURI
	}
	if next.Target == BootTargetUefiHTTP && m.vm.Firmware != FirmwareUEFI {
		writeError(w, http.StatusBadRequest, "PropertyValueNotInList",
			"The value UefiHttp for the property BootSourceOverrideTarget is not in the list of acceptable values: the system boots in Legacy mode.")
		return
	}
	if patch.BootSourceOverrideEnabled != nil {
		if !slices.Contains(bootEnabled, *patch.BootSourceOverrideEnabled) {
			writeError(w, http.StatusBadRequest, "PropertyValueNotInList", fmt.Sprintf("The value %s for the property BootSourceOverrideEnabled is not in the list of acceptable values.", *patch.BootSourceOverrideEnabled))
			return
		}
		next.Enabled = *patch.BootSourceOverrideEnabled
	}
	ctx, cancel := s.actionContext()
	defer cancel()
	// The mode is the firmware's from the next start on (bios.go).
	if patch.BootSourceOverrideMode != nil && *patch.BootSourceOverrideMode != m.nextBootMode() {
		if err := m.setNextBootMode(ctx, *patch.BootSourceOverrideMode); err != nil {
			writeError(w, http.StatusInternalServerError, "InternalError", err.Error())
			return
		}
	}
	s.log.Info("redfish boot override", "vm", m.vm.Name, "target", next.Target, "enabled", next.Enabled, "http_boot_uri", next.HTTPBootURI, "user", r.Context().Value(userKey{}))
	if err := m.SetBoot(ctx, next); err != nil {
		writeError(w, http.StatusInternalServerError, "InternalError", err.Error())
		return
	}
	s.handleSystem(w, r, m)
}

func (s *Server) handleReset(w http.ResponseWriter, r *http.Request, m *Machine) {
	var body struct{ ResetType string }
	if !decodeBody(w, r, &body) {
		return
	}
	if !slices.Contains(resetTypes, body.ResetType) {
		writeError(w, http.StatusBadRequest, "ActionParameterValueNotInList",
			fmt.Sprintf("The value %q for the parameter ResetType in the action ComputerSystem.Reset is not in the list of acceptable values.", body.ResetType))
		return
	}
	s.log.Info("redfish reset", "vm", m.vm.Name, "reset_type", body.ResetType, "user", r.Context().Value(userKey{}))
	ctx, cancel := s.actionContext()
	defer cancel()
	var err error
	switch body.ResetType {
	case "On":
		s.markStarted(m)
		err = m.PowerOn(ctx)
	case "ForceOff":
		err = m.ForceOff(ctx)
	case "GracefulShutdown":
		err = m.GracefulShutdown(ctx)
	case "ForceRestart":
		s.markStarted(m)
		err = m.ForceRestart(ctx)
	case "PowerCycle":
		s.markStarted(m)
		err = m.PowerCycle(ctx)
	case "Nmi":
		err = m.NMI(ctx)
	case "GracefulRestart":
		// Accepted now, carried out as the guest powers off (or not at all
		// if it ignores ACPI), as on a real server.
		s.markStarted(m)
		s.bg.Add(1)
		go func() {
			defer s.bg.Done()
			ctx, cancel := context.WithTimeout(s.ctx, DefaultGracefulRestartTimeout+DefaultActionTimeout)
			defer cancel()
			if err := m.GracefulRestart(ctx, DefaultGracefulRestartTimeout); err != nil {
				s.log.Warn("graceful restart did not complete", "vm", m.vm.Name, "err", err)
			}
		}()
	}
	if err != nil {
		s.log.Error("redfish reset failed", "vm", m.vm.Name, "reset_type", body.ResetType, "err", err)
		writeError(w, http.StatusInternalServerError, "InternalError", err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) markStarted(m *Machine) {
	s.mu.Lock()
	s.started[m.vm.Name] = true
	s.mu.Unlock()
}

func (s *Server) handleManagers(w http.ResponseWriter, r *http.Request) {
	p := redfishRoot + "/Managers"
	writeJSONResponse(w, http.StatusOK, collection(p, "#ManagerCollection.ManagerCollection", "Manager Collection", s.memberPaths(p)))
}

func (s *Server) handleManager(w http.ResponseWriter, r *http.Request, m *Machine) {
	p := redfishRoot + "/Managers/" + m.vm.Name
	body := map[string]any{
		odataID:           p,
		odataType:         "#Manager.v1_10_0.Manager",
		"Id":              m.vm.Name,
		"Name":            "ironflow virtual BMC for " + m.vm.Name,
		"ManagerType":     "BMC",
		"Model":           "ironflow vbmc",
		"FirmwareVersion": s.firmwareVersion(m, "BMC"),
		"UUID":            nameUUID(":manager/" + m.vm.Name),
		"PowerState":      PowerOn,
		"Status":          okStatus(),
		"VirtualMedia":    link(p + "/VirtualMedia"),
		"Links": map[string]any{
			"ManagerForServers": []any{link(redfishRoot + "/Systems/" + m.vm.Name)},
			"ManagerForChassis": []any{link(redfishRoot + "/Chassis/" + m.vm.Name)},
		},
	}
	maps.Copy(body, m.consoleProperties())
	writeJSONResponse(w, http.StatusOK, body)
}

func (s *Server) handleVirtualMedias(w http.ResponseWriter, r *http.Request, m *Machine) {
	p := redfishRoot + "/Managers/" + m.vm.Name + "/VirtualMedia"
	writeJSONResponse(w, http.StatusOK, collection(p, "#VirtualMediaCollection.VirtualMediaCollection", "Virtual Media Services", []string{p + "/" + virtualMediaCd}))
}

func (s *Server) handleVirtualMedia(w http.ResponseWriter, r *http.Request, m *Machine) {
	media, inserted, err := m.Media()
	if err != nil {
		writeError(w, http.StatusInternalServerError, "InternalError", err.Error())
		return
	}
	p := redfishRoot + "/Managers/" + m.vm.Name + "/VirtualMedia/" + virtualMediaCd
	body := map[string]any{
		odataID:          p,
		odataType:        "#VirtualMedia.v1_3_0.VirtualMedia",
		"Id":             virtualMediaCd,
		"Name":           "Virtual CD",
		"MediaTypes":     []string{"CD", "DVD"},
		"Image":          nil,
		"ImageName":      nil,
		"Inserted":       inserted,
		"WriteProtected": true,
		"ConnectedVia":   "NotConnected",
		"Actions": map[string]any{
			"#VirtualMedia.InsertMedia": map[string]any{"target": p + "/Actions/VirtualMedia.InsertMedia"},
			"#VirtualMedia.EjectMedia":  map[string]any{"target": p + "/Actions/VirtualMedia.EjectMedia"},
		},
	}
	if inserted {
		body["Image"] = media.Image
		body["ImageName"] = imageName(media.Image)
		body["ConnectedVia"] = "URI"
		body["TransferMethod"] = "Upload"
	}
	writeJSONResponse(w, http.StatusOK, body)
}

func imageName(u string) string {
	u, _, _ = strings.Cut(u, "?")
	return u[strings.LastIndex(u, "/")+1:]
}

func (s *Server) handleInsertMedia(w http.ResponseWriter, r *http.Request, m *Machine) {
	var body struct {
		Image    string
		Inserted *bool
	}
	if !decodeBody(w, r, &body) {
		return
	}
	if body.Image == "" {
		writeError(w, http.StatusBadRequest, "ActionParameterMissing", "The action VirtualMedia.InsertMedia requires the parameter Image to be present in the request body.")
		return
	}
	if body.Inserted != nil && !*body.Inserted {
		writeError(w, http.StatusBadRequest, "ActionParameterNotSupported", "Inserted false is not supported: use VirtualMedia.EjectMedia.")
		return
	}
	s.log.Info("redfish insert media", "vm", m.vm.Name, "image", body.Image, "user", r.Context().Value(userKey{}))
	ctx, cancel := context.WithTimeout(s.ctx, DefaultMediaDownloadTimeout+DefaultActionTimeout)
	defer cancel()
	if err := m.InsertMedia(ctx, body.Image); err != nil {
		s.log.Error("redfish insert media failed", "vm", m.vm.Name, "image", body.Image, "err", err)
		if errors.Is(err, errMediaURL) {
			writeError(w, http.StatusBadRequest, "ActionParameterValueFormatError", err.Error())
			return
		}
		writeError(w, http.StatusInternalServerError, "InternalError", err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleEjectMedia(w http.ResponseWriter, r *http.Request, m *Machine) {
	s.log.Info("redfish eject media", "vm", m.vm.Name, "user", r.Context().Value(userKey{}))
	ctx, cancel := s.actionContext()
	defer cancel()
	if err := m.EjectMedia(ctx); err != nil {
		writeError(w, http.StatusInternalServerError, "InternalError", err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleChassisCollection(w http.ResponseWriter, r *http.Request) {
	p := redfishRoot + "/Chassis"
	writeJSONResponse(w, http.StatusOK, collection(p, "#ChassisCollection.ChassisCollection", "Chassis Collection", s.memberPaths(p)))
}

func (s *Server) handleChassis(w http.ResponseWriter, r *http.Request, m *Machine) {
	power, err := m.PowerState(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, "InternalError", err.Error())
		return
	}
	doc := map[string]any{
		odataID:        redfishRoot + "/Chassis/" + m.vm.Name,
		odataType:      "#Chassis.v1_14_0.Chassis",
		"Id":           m.vm.Name,
		"Name":         m.vm.Name,
		"ChassisType":  "RackMount",
		"UUID":         nameUUID("chassis/" + m.vm.Name),
		"PowerState":   power,
		"IndicatorLED": m.indicator("chassis"),
		"Status":       okStatus(),
		"Links": map[string]any{
			"ComputerSystems": []any{link(redfishRoot + "/Systems/" + m.vm.Name)},
			"ManagedBy":       []any{link(redfishRoot + "/Managers/" + m.vm.Name)},
		},
	}
	maps.Copy(doc, sensorLinks(redfishRoot+"/Chassis/"+m.vm.Name)) // sensors.go
	writeJSONResponse(w, http.StatusOK, doc)
}

func link(p string) map[string]any { return map[string]any{odataID: p} }

func okStatus() map[string]any { return map[string]any{"State": "Enabled", "Health": "OK"} }

func collection(p, typ, name string, members []string) map[string]any {
	ms := make([]any, len(members))
	for i, m := range members {
		ms[i] = link(m)
	}
	return map[string]any{
		odataID:               p,
		odataType:             typ,
		"Name":                name,
		"Members":             ms,
		"Members@odata.count": len(ms),
	}
}

// etagMatches compares an If-Match header with an ETag, weak or strong,
// quoted or not (clients differ).
func etagMatches(ifMatch, etag string) bool {
	norm := func(t string) string { return strings.Trim(strings.TrimPrefix(strings.TrimSpace(t), "W/"), `"`) }
	for _, t := range strings.Split(ifMatch, ",") {
		if strings.TrimSpace(t) == "*" || norm(t) == norm(etag) {
			return true
		}
	}
	return false
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func writeJSONResponse(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// writeError answers with a Redfish error body (Base message registry).
func writeError(w http.ResponseWriter, code int, messageID, message string) {
	writeJSONResponse(w, code, map[string]any{
		"error": map[string]any{
			"code":    "Base.1.8.GeneralError",
			"message": message,
			"@Message.ExtendedInfo": []any{map[string]any{
				odataType:   "#Message.v1_1_1.Message",
				"MessageId": "Base.1.8." + messageID,
				"Message":   message,
				"Severity":  "Warning",
			}},
		},
	})
}
