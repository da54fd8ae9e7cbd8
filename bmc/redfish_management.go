package bmc

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/stmcginnis/gofish/common"
	"github.com/stmcginnis/gofish/redfish"
)

// InjectNMI resets the system with ResetType Nmi, as Ironic's redfish
// management does (sushy's RESET_NMI). A system whose allowable reset
// types leave Nmi out cannot.
func (d *redfishDriver) InjectNMI(ctx context.Context) error {
	c, err := d.call(ctx)
	if err != nil {
		return err
	}
	s, err := d.system(c)
	if err != nil {
		return fmt.Errorf("inject NMI via redfish %s: %w", d.cfg.endpoint, err)
	}
	if _, ok := pickReset(s, redfish.NmiResetType); !ok {
		return fmt.Errorf("%w: inject NMI via redfish %s: Nmi is not among the reset types %v", ErrUnsupported, d.cfg.endpoint, s.SupportedResetTypes)
	}
	if err := d.reset(s, redfish.NmiResetType); err != nil {
		return fmt.Errorf("inject NMI via redfish %s: %w", d.cfg.endpoint, err)
	}
	return nil
}

// rfLit is what a Redfish resource says of its indicator: IndicatorLED
// (Lit, Off, Blinking, Unknown; deprecated in ComputerSystem 1.13 and
// Chassis 1.14 for LocationIndicatorActive, which is on or off) and the
// links to the resources that have more.
type rfLit struct {
	ID                      string `json:"Id"`
	UUID                    string
	IndicatorLED            string
	LocationIndicatorActive *bool
	Links                   struct{ Chassis common.Links }
	Storage                 common.Link
	Drives                  common.Links
}

// redfishLED maps IndicatorLED to Ironic's states, as Ironic's redfish
// management's INDICATOR_MAP does.
var redfishLED = map[string]string{
	"Lit": IndicatorOn, "Off": IndicatorOff, "Blinking": IndicatorBlinking, "Unknown": IndicatorUnknown,
}

// rfIndicator is an indicator and the resource that holds it.
type rfIndicator struct {
	Indicator
	uri      string
	location bool // LocationIndicatorActive rather than IndicatorLED
}

// indicatorOf reads a resource's indicator; ok is false when it has none.
// Ironic names the system's and a chassis's by their UUID; a chassis
// without one (DMTF's and HPE's mockups have none) by its Id.
func indicatorOf(component, name, uri string, doc rfLit) (rfIndicator, bool) {
	in := rfIndicator{Indicator: Indicator{Component: component, Name: name}, uri: uri}
	switch {
	case doc.IndicatorLED != "":
		in.States = []string{IndicatorBlinking, IndicatorOff, IndicatorOn}
		in.State = redfishLED[doc.IndicatorLED]
		if in.State == "" {
			in.State = IndicatorUnknown
		}
	case doc.LocationIndicatorActive != nil:
		in.location = true
		in.States = []string{IndicatorOff, IndicatorOn}
		in.State = IndicatorOff
		if *doc.LocationIndicatorActive {
			in.State = IndicatorOn
		}
	default:
		return in, false
	}
	return in, true
}

func orID(uuid, id string) string {
	if uuid != "" {
		return uuid
	}
	return id
}

// Indicators reads the system's, its chassis' and its drives'
// indicators, as Ironic's redfish get_supported_indicators lists them
// (chassis, system, disk; a drive is named "<storage Id>:<drive Id>").
// A chassis or a storage that cannot be read is left out, as Ironic
// leaves out a component whose read failed.
func (d *redfishDriver) Indicators(ctx context.Context) ([]Indicator, error) {
	c, err := d.call(ctx)
	if err != nil {
		return nil, err
	}
	all, err := d.indicators(c)
	if err != nil {
		return nil, fmt.Errorf("read indicators via redfish %s: %w", d.cfg.endpoint, err)
	}
	out := make([]Indicator, len(all))
	for i, in := range all {
		out[i] = in.Indicator
	}
	return out, nil
}

func (d *redfishDriver) indicators(c *rfCall) ([]rfIndicator, error) {
	uri, err := d.resolveSystem(c)
	if err != nil {
		return nil, err
	}
	var sys rfLit
	if err := getJSON(c, uri, &sys); err != nil {
		return nil, fmt.Errorf("read system %s: %w", uri, err)
	}
	var out []rfIndicator
	for _, l := range sys.Links.Chassis {
		var ch rfLit
		if err := getJSON(c, l.String(), &ch); err != nil {
			d.log.Debug("chassis indicator not available", "chassis", l.String(), "error", err)
			continue
		}
		if in, ok := indicatorOf(ComponentChassis, orID(ch.UUID, ch.ID), l.String(), ch); ok {
			out = append(out, in)
		}
	}
	if in, ok := indicatorOf(ComponentSystem, orID(sys.UUID, sys.ID), uri, sys); ok {
		out = append(out, in)
	}
	if sys.Storage != "" {
		storages, err := collectionMembers(c, sys.Storage.String())
		if err != nil {
			d.log.Debug("drive indicators not available", "storage", sys.Storage.String(), "error", err)
			storages = nil
		}
		for _, su := range storages {
			var st rfLit
			if err := getJSON(c, su, &st); err != nil {
				continue
			}
			for _, dl := range st.Drives {
				var dr rfLit
				if err := getJSON(c, dl.String(), &dr); err != nil {
					continue
				}
				if in, ok := indicatorOf(ComponentDisk, st.ID+":"+dr.ID, dl.String(), dr); ok {
					out = append(out, in)
				}
			}
		}
	}
	return out, nil
}

// SetIndicator PATCHes the resource's IndicatorLED (Lit, Off, Blinking)
// or its LocationIndicatorActive (on, off).
func (d *redfishDriver) SetIndicator(ctx context.Context, component, name, state string) error {
	c, err := d.call(ctx)
	if err != nil {
		return err
	}
	all, err := d.indicators(c)
	if err != nil {
		return fmt.Errorf("read indicators via redfish %s: %w", d.cfg.endpoint, err)
	}
	i := slices.IndexFunc(all, func(in rfIndicator) bool { return in.Component == component && in.Name == name })
	if i < 0 {
		return fmt.Errorf("%w: %s@%s", ErrUnknownIndicator, name, component)
	}
	in := all[i]
	if !slices.Contains(in.States, state) {
		return fmt.Errorf("%w: %s@%s takes %s, not %s", ErrIndicatorState, name, component, strings.Join(in.States, ", "), state)
	}
	var patch map[string]any
	if in.location {
		patch = map[string]any{"LocationIndicatorActive": state == IndicatorOn}
	} else {
		for led, st := range redfishLED {
			if st == state {
				patch = map[string]any{"IndicatorLED": led}
			}
		}
	}
	d.log.Info("redfish indicator", "resource", in.uri, "patch", patch)
	resp, err := c.Patch(in.uri, patch)
	if err != nil {
		return fmt.Errorf("set indicator %s@%s via redfish %s: %w", name, component, d.cfg.endpoint, err)
	}
	resp.Body.Close()
	return nil
}
