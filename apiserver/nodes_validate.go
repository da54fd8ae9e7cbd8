package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/glance"
	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/store"
)

// glanceValidateTimeout bounds validate's question to Glance.
const glanceValidateTimeout = 10 * time.Second

func (s *server) validate(c *gin.Context, n *store.Node) error {
	writeJSON(c, http.StatusOK, validateNode(n, s.glanceImageProblem(c.Request.Context(), n)))
	return nil
}

// glanceImageProblem is the deploy interface's validation of a Glance
// image, as Ironic's validate_image_properties asks its image service: for
// an agent deploy whose image_source names a Glance image (a UUID or
// glance://UUID), why the image cannot be deployed — missing, not active,
// without a checksum, of a container or disk format the agent does not
// write — or that no Glance is configured; "" when it can. An image_source
// that is a URL never reaches Glance.
func (s *server) glanceImageProblem(ctx context.Context, n *store.Node) string {
	if hardware.DeployOf(hardware.Interface(n.DeployInterface)).Flow() != hardware.FlowAgent {
		return ""
	}
	src, _ := hardware.Text(n.InstanceInfo, "image_source")
	id, ok := glance.ImageID(src)
	if !ok {
		return ""
	}
	if s.cfg.Glance == nil {
		return fmt.Sprintf("image_source %s is a Glance image, but no Glance is configured (--glance-url)", strings.TrimSpace(src))
	}
	ctx, cancel := context.WithTimeout(ctx, glanceValidateTimeout)
	defer cancel()
	_, err := s.cfg.Glance.Resolve(ctx, id)
	switch {
	case err == nil:
		return ""
	case errors.Is(err, glance.ErrNotFound):
		return fmt.Sprintf("Image %s can not be found.", id)
	case errors.Is(err, glance.ErrUnacceptable):
		return strings.TrimSuffix(err.Error(), ": "+glance.ErrUnacceptable.Error())
	default:
		s.log.Warn("validate: Glance did not answer", "node", n.UUID, "image", id, "err", err)
		return fmt.Sprintf("Failed to connect to Glance to get the properties of the image %s", id)
	}
}
