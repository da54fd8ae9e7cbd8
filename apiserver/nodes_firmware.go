package apiserver

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/store"
)

// firmwareFields are a firmware component's fields in Ironic's order
// (API 1.86, ironic/api/controllers/v1/firmware.py): the first four are
// what a request without detail or fields gets.
var firmwareFields = []string{"component", "initial_version", "current_version", "last_version_flashed", "created_at", "updated_at"}

// firmwareIdentityFields identify a component's hardware (API 1.114): from
// that version they are among the fields of a request without detail or
// fields, and below it ?fields= may not name them.
var firmwareIdentityFields = []string{"vendor", "model", "serial_number"}

// listFirmware is GET /v1/nodes/{node}/firmware: the components the
// firmware interface last read from the BMC (workflows/firmware.go),
// {"firmware": [...]}.
func (s *server) listFirmware(c *gin.Context, n *store.Node) error {
	identity := ver(c) >= v114FirmwareIdentity
	fields := firmwareFields[:4]
	known := firmwareFields
	if identity {
		fields = append(slices.Clip(firmwareFields[:4]), firmwareIdentityFields...)
		known = append(slices.Clip(firmwareFields), firmwareIdentityFields...)
	}
	if d := c.Query("detail"); d != "" {
		on, err := parseBool("detail", d)
		if err != nil {
			return err
		}
		if on {
			fields = known
		}
	}
	if f := c.Query("fields"); f != "" {
		if c.Query("detail") != "" {
			return badRequest("Can not specify ?detail=True and fields in the same request.")
		}
		fields = nil
		var bad, tooNew []string
		for _, name := range strings.Split(f, ",") {
			name = strings.TrimSpace(name)
			if !identity && slices.Contains(firmwareIdentityFields, name) {
				tooNew = append(tooNew, name)
			} else if !slices.Contains(known, name) {
				bad = append(bad, name)
			}
			fields = append(fields, name)
		}
		if len(tooNew) > 0 {
			slices.Sort(tooNew)
			return badRequest("Fields %s are not allowed in this API version. They require at least API version %s.",
				strings.Join(slices.Compact(tooNew), ", "), versionString(v114FirmwareIdentity))
		}
		if len(bad) > 0 {
			return badRequest("Field(s) \"%s\" are not valid", strings.Join(bad, ", "))
		}
	}
	comps, err := s.store.ListFirmwareComponents(c.Request.Context(), n.UUID)
	if err != nil {
		return fmt.Errorf("list firmware of node %s: %w", n.UUID, err)
	}
	out := make([]map[string]any, 0, len(comps))
	for _, fc := range comps {
		all := map[string]any{
			"component": fc.Component, "initial_version": fc.InitialVersion, "current_version": fc.CurrentVersion,
			"last_version_flashed": fc.LastVersionFlashed, "created_at": isoTime(fc.CreatedAt),
			"updated_at": timeOrNil(fc.UpdatedAt),
			"vendor":     strOrNil(fc.Vendor), "model": strOrNil(fc.Model), "serial_number": strOrNil(fc.SerialNumber),
		}
		m := make(map[string]any, len(fields))
		for _, f := range fields {
			m[f] = all[f]
		}
		out = append(out, m)
	}
	writeJSON(c, http.StatusOK, map[string]any{"firmware": out})
	return nil
}
