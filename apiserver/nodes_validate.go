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
	"github.com/ironflow/ironflow/imagecache"
	"github.com/ironflow/ironflow/oci"
	"github.com/ironflow/ironflow/provision"
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
	if d := hardware.DeployOf(hardware.Interface(n.DeployInterface)); d.Flow() != hardware.FlowAgent || !d.WritesImage() {
		return ""
	}
	src, _ := hardware.Text(n.InstanceInfo, "image_source")
	if oci.IsOCI(src) {
		return s.ociImageProblem(ctx, n)
	}
	id, ok := glance.ImageID(src)
	if !ok {
		return ""
	}
	if s.cfg.Glance == nil {
		return fmt.Sprintf("image_source %s is a Glance image, but no Glance is configured (--glance-url)", strings.TrimSpace(src))
	}
	ctx, cancel := context.WithTimeout(ctx, glanceValidateTimeout)
	defer cancel()
	img, err := s.cfg.Glance.Resolve(ctx, id)
	if err != nil {
		return s.glanceReason(n, id, "", err)
	}
	// A partition image's kernel_id and ramdisk_id become the deploy's
	// kernel and ramdisk unless instance_info gives them.
	if t, _ := hardware.Text(n.InstanceInfo, "image_type"); t == "partition" || t == "" && img.Partition() {
		for _, f := range []struct{ part, ref string }{{"kernel", img.KernelID}, {"ramdisk", img.RamdiskID}} {
			part, ref := f.part, f.ref
			if v, _ := hardware.Text(n.InstanceInfo, part); v != "" || ref == "" {
				continue
			}
			if _, err := s.cfg.Glance.ResolveFile(ctx, ref); err != nil {
				return s.glanceReason(n, ref, part+" (the image's "+part+"_id): ", err)
			}
		}
	}
	return ""
}

// glanceReason words what Glance answered about image id as Ironic's
// validate_image_properties does.
func (s *server) glanceReason(n *store.Node, id, prefix string, err error) string {
	switch {
	case errors.Is(err, glance.ErrNotFound):
		return fmt.Sprintf("%sImage %s can not be found.", prefix, id)
	case errors.Is(err, glance.ErrUnacceptable):
		return prefix + strings.TrimSuffix(err.Error(), ": "+glance.ErrUnacceptable.Error())
	default:
		s.log.Warn("validate: Glance did not answer", "node", n.UUID, "image", id, "err", err)
		return fmt.Sprintf("%sFailed to connect to Glance to get the properties of the image %s", prefix, id)
	}
}

// ociValidateTimeout bounds validate's questions to an OCI registry.
const ociValidateTimeout = 15 * time.Second

// ociImageProblem resolves an oci:// image_source as the deploy will
// (docs/oci-images.md): the tag or digest exists, the node's architecture
// is in the index, the layer is a disk image the agent writes, the pull
// secret is accepted. The reason is Ironic's text for the failure; it
// never holds the pull secret.
func (s *server) ociImageProblem(ctx context.Context, n *store.Node) string {
	ctx, cancel := context.WithTimeout(ctx, ociValidateTimeout)
	defer cancel()
	ni := imagecache.NodeInfo{DriverInfo: n.DriverInfo, Properties: n.Properties}
	o, _, err := imagecache.LocateNode(ctx, nil, n.InstanceInfo, ni)
	for _, part := range imagecache.BootParts {
		if err != nil {
			break
		}
		if _, _, err = imagecache.BootFileOCI(ctx, n.InstanceInfo, ni, part); err != nil {
			err = fmt.Errorf("%s: %w", part, err)
		}
	}
	if err == nil {
		s.pinValidated(ctx, n, o)
		return ""
	}
	if oci.KindOf(err) == oci.ErrUnavailable {
		s.log.Warn("validate: the OCI registry did not answer", "node", n.UUID, "err", errors.Unwrap(err))
	}
	return err.Error()
}

// pinValidated keeps the manifest validate resolved for the next deploy
// (imagecache.ValidatedPin): the digest an operator validated is the one
// deployed, even if the tag moves in between. Only a node a deploy can
// start from (available) is pinned, so that a running deploy's own pin is
// never replaced; a failure to write is logged, validation stands.
func (s *server) pinValidated(ctx context.Context, n *store.Node, o imagecache.Origin) {
	pin := o.OCIPin()
	if pin == nil {
		return
	}
	pin[imagecache.PinnedBy], pin[imagecache.PinnedAt] = imagecache.PinnedByValidate, time.Now().UTC().Format(time.RFC3339)
	ok, err := s.store.MergeDriverInternalInfoInState(ctx, n.UUID, map[string]any{imagecache.KeyOCIPin: pin}, []provision.State{provision.Available})
	switch {
	case err != nil:
		s.log.Warn("validate: the resolved OCI manifest was not kept for the deploy", "node", n.UUID, "err", err)
	case ok:
		s.log.Info("validate: OCI image resolved and kept for the next deploy", "node", n.UUID, "source", pin["source"], "manifest", pin["manifest"])
	}
}
