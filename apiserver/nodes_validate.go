package apiserver

import (
	"net/http"

	"github.com/gin-gonic/gin"
)

func (s *server) validate(c *gin.Context) error {
	n, err := s.loadNode(c, c.Param("node"))
	if err != nil {
		return err
	}
	writeJSON(c, http.StatusOK, validateNode(n))
	return nil
}
