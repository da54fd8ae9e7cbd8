package apiserver

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/ironflow/ironflow/store"
)

// Shards (API 1.82): a node's shard field, the list filters shard and
// sharded, and GET /v1/shards. Ironic's shard filter takes a comma-separated
// list and selects the nodes in any of them.

func filterShards(f *nodeQuery, _, v string) (string, error) {
	f.Shards = []string{}
	for _, sh := range strings.Split(v, ",") {
		if sh = strings.TrimSpace(sh); sh != "" {
			f.Shards = append(f.Shards, sh)
		}
	}
	return v, nil
}

func filterSharded(f *nodeQuery, name, v string) (string, error) {
	b, err := parseBool(name, v)
	if err != nil {
		return "", err
	}
	f.Sharded = &b
	if b {
		return "true", nil
	}
	return "false", nil
}

// listShards answers GET /v1/shards: {"shards": [{"name", "count"}]}, the
// node count of each shard, largest first, with the unsharded nodes
// counted under the name "None" as Ironic does.
func (s *server) listShards(c *gin.Context) error {
	shards, err := s.store.ListShards(c.Request.Context())
	if err != nil {
		return err
	}
	if shards == nil {
		shards = []store.Shard{}
	}
	writeJSON(c, http.StatusOK, map[string]any{"shards": shards})
	return nil
}

// chassis_uuid of a node: a UUID (the chassis must exist: the store's
// foreign key, answered as Ironic's ChassisNotFound).
func setChassisUUID(n *node, v any) error {
	switch t := v.(type) {
	case nil:
		n.ChassisUUID = nil
	case string:
		u, err := uuid.Parse(t)
		if err != nil || !isUUID(t) {
			return badRequest("Expected a UUID but received %s.", t)
		}
		s := u.String()
		n.ChassisUUID = &s
	default:
		return typeErr(v, "string", "null")
	}
	return nil
}

func filterChassisUUID(f *nodeQuery, _, v string) (string, error) {
	if !isUUID(v) {
		return "", badRequest("Expected a UUID but received %s.", v)
	}
	f.ChassisUUID = v
	return v, nil
}
