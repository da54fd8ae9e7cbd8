package apiserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/pyliteral"
	"github.com/ironflow/ironflow/store"
)

// raidProperty is one property of a logical disk in Ironic's
// raid_config_schema.json (ironic/drivers/raid_config_schema.json), with
// the schema's description, which GET /v1/drivers/{d}/raid/
// logical_disk_properties serves.
type raidProperty struct {
	description string
	check       func(v any) string // "" when v is valid, else jsonschema's message
}

func raidEnum(values ...string) func(any) string {
	return func(v any) string {
		if s, ok := v.(string); ok && slices.Contains(values, s) {
			return ""
		}
		quoted := make([]string, len(values))
		for i, s := range values {
			quoted[i] = pyliteral.Repr(s)
		}
		return fmt.Sprintf("%s is not one of [%s]", pyliteral.Repr(v), strings.Join(quoted, ", "))
	}
}

func raidType(typ string) func(any) string {
	return func(v any) string {
		ok := false
		switch typ {
		case "string":
			_, ok = v.(string)
		case "boolean":
			_, ok = v.(bool)
		}
		if ok {
			return ""
		}
		return fmt.Sprintf("%s is not of type %s", pyliteral.Repr(v), pyliteral.Repr(typ))
	}
}

// positiveInteger is the schema's integer with minimum 0, exclusive.
func positiveInteger(v any) (ok bool, msg string) {
	n, isNum := v.(json.Number)
	if !isNum {
		return false, fmt.Sprintf("%s is not of type 'integer'", pyliteral.Repr(v))
	}
	i, err := n.Int64()
	if err != nil {
		return false, fmt.Sprintf("%s is not of type 'integer'", pyliteral.Repr(v))
	}
	if i <= 0 {
		return false, fmt.Sprintf("%s is less than or equal to the minimum of 0", pyliteral.Repr(v))
	}
	return true, ""
}

var raidProperties = map[string]raidProperty{
	"raid_level": {"RAID level for the logical disk. Valid values are 'JBOD', 0', '1', '2', '5', '6', '1+0', '5+0' and '6+0'. Required.",
		raidEnum("JBOD", "0", "1", "2", "5", "6", "1+0", "5+0", "6+0")},
	"size_gb": {"Size in GiB (Integer) for the logical disk. Use 'MAX' as size_gb if this logical disk is supposed to use the rest of the space available. Required.",
		func(v any) string {
			if s, ok := v.(string); ok && s == "MAX" {
				return ""
			}
			if ok, _ := positiveInteger(v); ok {
				return ""
			}
			return fmt.Sprintf("%s is not valid under any of the given schemas", pyliteral.Repr(v))
		}},
	"volume_name":    {"Name of the volume to be created. If this is not specified, it will be auto-generated. Optional.", raidType("string")},
	"is_root_volume": {"Specifies whether this disk is a root volume. By default, this is False. Optional.", raidType("boolean")},
	"share_physical_disks": {"Specifies whether other logical disks can share physical disks with this logical disk. By default, this is False. Optional.",
		raidType("boolean")},
	"disk_type": {"The type of disk preferred. Valid values are 'hdd' and 'ssd'. If this is not specified, disk type will not be a selection criterion for choosing backing physical disks. Optional.",
		raidEnum("hdd", "ssd")},
	"interface_type": {"The interface type of disk. Valid values are 'sata', 'scsi' and 'sas'. If this is not specified, interface type will not be a selection criterion for choosing backing physical disks. Optional.",
		raidEnum("sata", "scsi", "sas")},
	"number_of_physical_disks": {"Number of physical disks to use for this logical disk. By default, the driver uses the minimum number of disks required for that RAID level. Optional.",
		func(v any) string { _, msg := positiveInteger(v); return msg }},
	"controller": {"Controller to use for this logical disk. If not specified, the driver will choose a suitable RAID controller on the bare metal node. Optional.",
		raidType("string")},
	// The schema's anyOf: disk names (strings) for a RAID controller, or
	// at least two root device hints (objects) for software RAID
	// (agent/raid.go).
	"physical_disks": {"The physical disks to use for this logical disk. If not specified, the driver will choose suitable physical disks to use. Optional.",
		func(v any) string {
			list, ok := v.([]any)
			if !ok {
				return fmt.Sprintf("%s is not valid under any of the given schemas", pyliteral.Repr(v))
			}
			strs, objs := 0, 0
			for _, e := range list {
				switch e.(type) {
				case string:
					strs++
				case map[string]any:
					objs++
				}
			}
			if strs == len(list) || (objs == len(list) && objs >= 2) {
				return ""
			}
			return fmt.Sprintf("%s is not valid under any of the given schemas", pyliteral.Repr(v))
		}},
}

// validateRAIDConfig checks a target RAID configuration as Ironic's
// raid.validate_configuration does: raid_config_schema.json's rules
// (logical_disks required, at least one; each with raid_level and size_gb,
// nothing the schema does not name, physical_disks only with controller),
// then at most one root volume. The message is Ironic's.
func validateRAIDConfig(cfg map[string]any) error {
	bad := func(format string, args ...any) error {
		return badRequest("RAID config validation error: %s", fmt.Sprintf(format, args...))
	}
	var extra []string
	for k := range cfg {
		if k != "logical_disks" {
			extra = append(extra, pyliteral.Repr(k))
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		return bad("Additional properties are not allowed (%s %s unexpected)", strings.Join(extra, ", "), wasWere(len(extra)))
	}
	raw, ok := cfg["logical_disks"]
	if !ok {
		return bad("'logical_disks' is a required property")
	}
	disks, ok := raw.([]any)
	if !ok {
		return bad("%s is not of type 'array'", pyliteral.Repr(raw))
	}
	if len(disks) == 0 {
		return bad("[] is too short")
	}
	roots := 0
	for _, d := range disks {
		ld, ok := d.(map[string]any)
		if !ok {
			return bad("%s is not of type 'object'", pyliteral.Repr(d))
		}
		for _, req := range []string{"raid_level", "size_gb"} {
			if _, ok := ld[req]; !ok {
				return bad("%s is a required property", pyliteral.Repr(req))
			}
		}
		var extra []string
		keys := make([]string, 0, len(ld))
		for k := range ld {
			if _, known := raidProperties[k]; !known {
				extra = append(extra, pyliteral.Repr(k))
			}
			keys = append(keys, k)
		}
		if len(extra) > 0 {
			sort.Strings(extra)
			return bad("Additional properties are not allowed (%s %s unexpected)", strings.Join(extra, ", "), wasWere(len(extra)))
		}
		sort.Strings(keys)
		for _, k := range keys {
			if msg := raidProperties[k].check(ld[k]); msg != "" {
				return bad("%s", msg)
			}
		}
		if _, ok := ld["physical_disks"]; ok {
			if _, ok := ld["controller"]; !ok {
				return bad("'controller' is a dependency of 'physical_disks'")
			}
		}
		if root, _ := ld["is_root_volume"].(bool); root {
			roots++
		}
	}
	if roots > 1 {
		return badRequest("Raid config cannot have more than one root volume. %d root volumes were specified", roots)
	}
	return nil
}

// softwareRAIDOnly refuses, for raid_interface agent, a logical disk that
// is not software RAID: ironflow's agent builds md arrays only
// (agent/raid.go), it drives no RAID controller. Ironic's message for a
// configuration that mixes the two is kept as the first sentence.
func softwareRAIDOnly(node string, cfg map[string]any) error {
	disks, _ := cfg["logical_disks"].([]any)
	for i, d := range disks {
		ld, _ := d.(map[string]any)
		if c, _ := ld["controller"].(string); c != "software" {
			return badRequest("Software RAID configuration requires all logical disks to have 'controller'='software'. "+
				"Logical disk %d of node %s has controller %s: the agent raid interface builds software RAID only; use a hardware RAID interface (redfish) for a RAID controller.",
				i, node, pyliteral.Repr(ld["controller"]))
		}
	}
	return nil
}

func wasWere(n int) string {
	if n == 1 {
		return "was"
	}
	return "were"
}

// raidSupported reports whether the RAID interface validates and applies a
// target RAID configuration (no-raid does not: Ironic's
// UnsupportedDriverExtension).
func raidSupported(iface string) bool {
	impl, _ := hardware.Implemented(hardware.KindRAID, hardware.Interface(iface))
	return iface != "" && !impl.Refuses()
}

// setRAIDConfig is PUT /v1/nodes/{node}/states/raid (API 1.12): the body is
// the node's new target_raid_config, checked against Ironic's
// raid_config_schema.json; {} clears it. The configuration is applied by
// the raid interface's create_configuration clean step.
func (s *server) setRAIDConfig(c *gin.Context, n *store.Node) error {
	body, err := decodeObject(c)
	if err != nil {
		return err
	}
	if !raidSupported(n.RAIDInterface) {
		return badRequest("Driver %s does not support raid (disabled or not implemented).", n.Driver)
	}
	if len(body) > 0 {
		if err := validateRAIDConfig(body); err != nil {
			return err
		}
		if hardware.StepsOf(hardware.KindRAID, hardware.Interface(n.RAIDInterface)) == hardware.StepsInBand {
			if err := softwareRAIDOnly(n.UUID, body); err != nil {
				return err
			}
		}
	}
	// Plain JSON values for the store (json.Number kept exact on the way).
	b, _ := json.Marshal(body)
	var target map[string]any
	_ = json.Unmarshal(b, &target)
	if _, err := s.store.UpdateNode(c.Request.Context(), n.UUID, func(cur *store.Node) error {
		cur.TargetRAIDConfig = target
		return nil
	}); err != nil {
		return nodeWriteError(err, n)
	}
	writeEmpty(c, http.StatusNoContent, "")
	return nil
}

// raidLogicalDiskProperties is GET /v1/drivers/{name}/raid/
// logical_disk_properties (1.12): the properties a logical disk of the
// driver's default RAID interface takes, with their descriptions.
func (s *server) raidLogicalDiskProperties(c *gin.Context) error {
	ht, ok := s.driver(c.Param("name"))
	if !ok {
		return errorf(http.StatusNotFound, "Could not find the following driver(s) or hardware type(s): %s.", c.Param("name"))
	}
	if !raidSupported(string(ht.Default(hardware.KindRAID))) {
		return badRequest("Driver %s does not support raid (disabled or not implemented).", ht.Name)
	}
	out := make(map[string]string, len(raidProperties))
	for k, p := range raidProperties {
		out[k] = p.description
	}
	writeJSON(c, http.StatusOK, out)
	return nil
}
