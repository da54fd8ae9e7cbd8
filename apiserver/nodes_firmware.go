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

// listFirmware is GET /v1/nodes/{node}/firmware: the components the
// firmware interface last read from the BMC (workflows/firmware.go),
// {"firmware": [...]}.
func (s *server) listFirmware(c *gin.Context, n *store.Node) error {
	fields := firmwareFields[:4]
	if d := c.Query("detail"); d != "" {
		on, err := parseBool("detail", d)
		if err != nil {
			return err
		}
		if on {
			fields = firmwareFields
		}
	}
	if f := c.Query("fields"); f != "" {
		if c.Query("detail") != "" {
			return badRequest("Can not specify ?detail=True and fields in the same request.")
		}
		fields = nil
		var bad []string
		for _, name := range strings.Split(f, ",") {
			name = strings.TrimSpace(name)
			if !slices.Contains(firmwareFields, name) {
				bad = append(bad, name)
			}
			fields = append(fields, name)
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
