package apiserver

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/store"
)

func (s *server) validate(c *gin.Context, n *store.Node) error {
	writeJSON(c, http.StatusOK, validateNode(n))
	return nil
}
