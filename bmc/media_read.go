package bmc

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/stmcginnis/gofish/redfish"
)

// MediaDevice is one virtual media device of a BMC as it reads now: the
// Redfish VirtualMedia resource's MediaTypes, Inserted, Image and
// ImageName (DMTF's VirtualMedia schema), as Ironic's redfish management
// interface reports them for GET /v1/nodes/{node}/vmedia (API 1.93).
type MediaDevice struct {
	MediaTypes []string `json:"media_types"`
	Inserted   bool     `json:"inserted"`
	Image      string   `json:"image"`
	ImageName  string   `json:"image_name"`
}

// MediaReader is a Driver that reads its virtual media devices. It is a
// separate interface so that a driver without virtual media (IPMI) needs
// nothing: a Driver that is not a MediaReader does not support the read.
type MediaReader interface {
	ReadMedia(ctx context.Context) ([]MediaDevice, error)
}

// ReadMedia lists every virtual media device the system's managers and the
// system itself link to (as findCD looks for the CD), in link order.
func (d *redfishDriver) ReadMedia(ctx context.Context) ([]MediaDevice, error) {
	c, err := d.call(ctx)
	if err != nil {
		return nil, err
	}
	out, err := d.readMedia(c)
	if err != nil {
		return nil, fmt.Errorf("read virtual media via redfish %s: %w", d.cfg.endpoint, err)
	}
	return out, nil
}

func (d *redfishDriver) readMedia(c *rfCall) ([]MediaDevice, error) {
	collections, err := d.mediaCollections(c)
	if err != nil {
		return nil, err
	}
	if len(collections) == 0 {
		return nil, fmt.Errorf("%w: the system and its managers link no virtual media", ErrUnsupported)
	}
	out := []MediaDevice{}
	for _, col := range collections {
		members, err := collectionMembers(c, col)
		if err != nil {
			if errors.Is(err, ErrUnsupported) { // 404: a link to nowhere
				d.log.Warn("virtual media collection not readable", "collection", col, "error", err)
				continue
			}
			return nil, fmt.Errorf("list virtual media %s: %w", col, err)
		}
		for _, m := range members {
			vm, err := redfish.GetVirtualMedia(c, m)
			if err != nil {
				return nil, fmt.Errorf("read virtual media %s: %w", m, err)
			}
			types := make([]string, len(vm.MediaTypes))
			for i, t := range vm.MediaTypes {
				types[i] = string(t)
			}
			out = append(out, MediaDevice{MediaTypes: types, Inserted: vm.Inserted, Image: vm.Image, ImageName: vm.ImageName})
		}
	}
	return out, nil
}

// ReadMedia is the fake machine's one virtual CD.
func (d *fakeDriver) ReadMedia(ctx context.Context) ([]MediaDevice, error) {
	if err := d.call(ctx, "read media"); err != nil {
		return nil, err
	}
	d.m.mu.Lock()
	defer d.m.mu.Unlock()
	if _, err := d.m.load(); err != nil {
		return nil, err
	}
	dev := MediaDevice{MediaTypes: []string{"CD", "DVD"}, Inserted: d.m.media != "", Image: d.m.media}
	if dev.Inserted {
		dev.ImageName = d.m.media[strings.LastIndex(d.m.media, "/")+1:]
	}
	return []MediaDevice{dev}, nil
}
