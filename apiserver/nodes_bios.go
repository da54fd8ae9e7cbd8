package apiserver

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/store"
)

// BIOS settings of a node (API 1.40), as the bios interface last cached
// them; 1.74 adds the attribute registry's fields (?detail=True, ?fields=
// and always on GET .../bios/{name}), as Ironic's bios controller does.
// Changing them is a clean or service step (bios.apply_configuration).

const v74BIOSRegistry = 74

var (
	biosDefaultFields  = []string{"name", "value"}
	biosRegistryFields = []string{"name", "value", "attribute_type", "allowable_values", "lower_bound",
		"max_length", "min_length", "read_only", "reset_required", "unique", "upper_bound"}
)

func biosView(base, node string, b store.BIOSSetting, fields []string) map[string]any {
	all := map[string]any{
		"name": b.Name, "value": b.Value, "attribute_type": b.AttributeType, "allowable_values": b.AllowableValues,
		"lower_bound": b.LowerBound, "upper_bound": b.UpperBound, "min_length": b.MinLength, "max_length": b.MaxLength,
		"read_only": b.ReadOnly, "reset_required": b.ResetRequired, "unique": b.Unique,
	}
	out := map[string]any{"created_at": isoTime(b.CreatedAt), "updated_at": timeOrNil(b.UpdatedAt)}
	for _, f := range fields {
		out[f] = all[f]
	}
	out["links"] = selfLinks(base, "nodes/"+node+"/bios/"+b.Name)
	return out
}

// biosFields is Ironic's get_request_return_fields for the bios list:
// detail and fields only from 1.74, not both.
func biosFields(c *gin.Context) ([]string, error) {
	detailText, hasDetail := c.GetQuery("detail")
	fieldsText, hasFields := c.GetQuery("fields")
	if hasDetail && ver(c) < v74BIOSRegistry {
		return nil, badRequest("Invalid query parameter ?detail=%s received.", detailText)
	}
	if hasFields && ver(c) < v74BIOSRegistry {
		return nil, badRequest("Invalid query parameter ?fields=%s received.", fieldsText)
	}
	detail := false
	if hasDetail {
		var err error
		if detail, err = parseBool("detail", detailText); err != nil {
			return nil, err
		}
	}
	if hasFields && detail {
		return nil, badRequest("Can not specify ?detail=True and fields in the same request.")
	}
	if detail {
		return biosRegistryFields, nil
	}
	if !hasFields {
		return biosDefaultFields, nil
	}
	var fields, bad []string
	for _, f := range strings.Split(fieldsText, ",") {
		f = strings.TrimSpace(f)
		switch {
		case f == "":
		case slices.Contains(biosRegistryFields, f):
			fields = append(fields, f)
		default:
			bad = append(bad, f)
		}
	}
	if len(bad) > 0 {
		return nil, badRequest("Field(s) \"%s\" are not valid", strings.Join(bad, ", "))
	}
	return fields, nil
}

func (s *server) listBIOS(c *gin.Context, n *store.Node) error {
	fields, err := biosFields(c)
	if err != nil {
		return err
	}
	list, err := s.store.ListBIOSSettings(c.Request.Context(), n.UUID)
	if err != nil {
		return fmt.Errorf("list BIOS settings of node %s: %w", n.UUID, err)
	}
	// Links name the node as the request did (Ironic's node_ident).
	ident := c.Param("node")
	out := make([]map[string]any, 0, len(list))
	for _, b := range list {
		out = append(out, biosView(s.baseURL(c), ident, b, fields))
	}
	writeJSON(c, http.StatusOK, map[string]any{"bios": out})
	return nil
}

func (s *server) showBIOS(c *gin.Context, n *store.Node) error {
	name := c.Param("setting")
	b, err := s.store.GetBIOSSetting(c.Request.Context(), n.UUID, name)
	if errors.Is(err, store.ErrNotFound) {
		return errorf(http.StatusNotFound, "Node %s doesn't have a BIOS setting '%s'", n.UUID, name)
	}
	if err != nil {
		return fmt.Errorf("get BIOS setting %s of node %s: %w", name, n.UUID, err)
	}
	fields := biosDefaultFields
	if ver(c) >= v74BIOSRegistry {
		fields = biosRegistryFields
	}
	writeJSON(c, http.StatusOK, map[string]any{name: biosView(s.baseURL(c), n.UUID, *b, fields)})
	return nil
}
