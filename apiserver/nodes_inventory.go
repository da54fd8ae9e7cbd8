package apiserver

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/store"
)

func (s *server) inventory(c *gin.Context, n *store.Node) error {
	inv, err := s.store.GetInventory(c.Request.Context(), n.UUID)
	if errors.Is(err, store.ErrNotFound) {
		return errorf(http.StatusNotFound, "Node inventory for node %s could not be found.", n.UUID)
	}
	if err != nil {
		return fmt.Errorf("get inventory of node %s: %w", n.UUID, err)
	}
	writeJSON(c, http.StatusOK, map[string]any{"inventory": mapOrEmpty(inv.Inventory), "plugin_data": mapOrEmpty(inv.PluginData)})
	return nil
}
