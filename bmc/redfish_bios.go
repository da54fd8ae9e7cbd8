package bmc

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/stmcginnis/gofish/common"
)

var _ BIOSConfigurer = (*redfishDriver)(nil)

// rfBios is the Bios resource (DMTF's Bios schema) with its
// @Redfish.Settings annotation: the settings object pending values are
// written to, and the apply times the service offers.
type rfBios struct {
	ODataID           string         `json:"@odata.id"`
	AttributeRegistry string         `json:"AttributeRegistry"`
	Attributes        map[string]any `json:"Attributes"`
	Settings          struct {
		SettingsObject      common.Link `json:"SettingsObject"`
		SupportedApplyTimes []string    `json:"SupportedApplyTimes"`
		Messages            []struct {
			MessageID         string   `json:"MessageId"`
			Message           string   `json:"Message"`
			RelatedProperties []string `json:"RelatedProperties"`
		} `json:"Messages"`
	} `json:"@Redfish.Settings"`
	Actions struct {
		Reset struct {
			Target string `json:"target"`
		} `json:"#Bios.ResetBios"`
	} `json:"Actions"`
}

// rfRegistryAttribute is one entry of an AttributeRegistry's
// RegistryEntries.Attributes (DMTF's AttributeRegistry schema).
type rfRegistryAttribute struct {
	AttributeName          string `json:"AttributeName"`
	Type                   string `json:"Type"`
	Value                  []struct{ ValueName string }
	LowerBound             *int64 `json:"LowerBound"`
	UpperBound             *int64 `json:"UpperBound"`
	MinLength              *int64 `json:"MinLength"`
	MaxLength              *int64 `json:"MaxLength"`
	ReadOnly               *bool  `json:"ReadOnly"`
	ResetRequired          *bool  `json:"ResetRequired"`
	IsSystemUniqueProperty *bool  `json:"IsSystemUniqueProperty"`
}

// systemLinks reads the links of the system that gofish does not expose.
func (d *redfishDriver) systemLinks(c *rfCall) (bios, secureBoot string, err error) {
	uri, err := d.resolveSystem(c)
	if err != nil {
		return "", "", err
	}
	var sys struct{ Bios, SecureBoot common.Link }
	if err := getJSON(c, uri, &sys); err != nil {
		return "", "", fmt.Errorf("read system %s: %w", uri, err)
	}
	return sys.Bios.String(), sys.SecureBoot.String(), nil
}

func (d *redfishDriver) bios(c *rfCall) (*rfBios, error) {
	link, _, err := d.systemLinks(c)
	if err != nil {
		return nil, err
	}
	if link == "" {
		return nil, fmt.Errorf("%w: the system links no Bios resource", ErrUnsupported)
	}
	var b rfBios
	if err := getJSON(c, link, &b); err != nil {
		return nil, fmt.Errorf("read Bios %s: %w", link, err)
	}
	if b.ODataID == "" {
		b.ODataID = link
	}
	if b.Attributes == nil {
		b.Attributes = map[string]any{}
	}
	return &b, nil
}

// attributeRegistry finds the Bios resource's AttributeRegistry among the
// service's Registries (a MessageRegistryFile whose Registry or Id names
// it) and reads its attributes. A service without it returns nil: the
// settings are then checked against the current attributes only.
func (d *redfishDriver) attributeRegistry(c *rfCall, name string) (map[string]BIOSSetting, error) {
	if name == "" {
		return nil, nil
	}
	var root struct{ Registries common.Link }
	if err := getJSON(c, "/redfish/v1/", &root); err != nil {
		return nil, fmt.Errorf("read service root: %w", err)
	}
	if root.Registries == "" {
		return nil, nil
	}
	members, err := collectionMembers(c, root.Registries.String())
	if err != nil {
		return nil, fmt.Errorf("list registries: %w", err)
	}
	for _, m := range members {
		var file struct {
			ID       string `json:"Id"`
			Registry string
			Location []struct {
				Language       string
				URI            string `json:"Uri"`
				PublicationURI string `json:"PublicationUri"`
			}
		}
		if err := getJSON(c, m, &file); err != nil {
			// A member that does not answer (a message registry the
			// service lists but does not serve) is not the one wanted.
			if errors.Is(err, ErrAuth) || errors.Is(err, ErrUnreachable) {
				return nil, fmt.Errorf("read registry file %s: %w", m, err)
			}
			d.log.Warn("registry file not readable", "file", m, "error", err)
			continue
		}
		if file.Registry != name && file.ID != name && path.Base(strings.TrimSuffix(m, "/")) != name {
			continue
		}
		// The English copy served by the BMC itself first.
		sort.SliceStable(file.Location, func(i, j int) bool {
			return file.Location[i].Language == "en" && file.Location[j].Language != "en"
		})
		for _, loc := range file.Location {
			if loc.URI == "" {
				continue
			}
			var reg struct {
				RegistryEntries struct {
					Attributes []rfRegistryAttribute
				}
			}
			if err := getJSON(c, loc.URI, &reg); err != nil {
				return nil, fmt.Errorf("read attribute registry %s: %w", loc.URI, err)
			}
			out := make(map[string]BIOSSetting, len(reg.RegistryEntries.Attributes))
			for _, a := range reg.RegistryEntries.Attributes {
				s := BIOSSetting{
					Name: a.AttributeName, AttributeType: a.Type,
					LowerBound: a.LowerBound, UpperBound: a.UpperBound, MinLength: a.MinLength, MaxLength: a.MaxLength,
					ReadOnly: a.ReadOnly, ResetRequired: a.ResetRequired, Unique: a.IsSystemUniqueProperty,
				}
				for _, v := range a.Value {
					s.AllowableValues = append(s.AllowableValues, v.ValueName)
				}
				out[a.AttributeName] = s
			}
			return out, nil
		}
	}
	return nil, nil
}

// BIOSSettings implements BIOSConfigurer: the Bios resource's attributes
// with their registry entries, sorted by name.
func (d *redfishDriver) BIOSSettings(ctx context.Context) ([]BIOSSetting, error) {
	c, err := d.call(ctx)
	if err != nil {
		return nil, err
	}
	b, err := d.bios(c)
	if err != nil {
		return nil, fmt.Errorf("read BIOS settings via redfish %s: %w", d.cfg.endpoint, err)
	}
	reg, err := d.attributeRegistry(c, b.AttributeRegistry)
	if err != nil {
		// The values are still worth caching without their registry.
		d.log.Warn("BIOS attribute registry not readable", "registry", b.AttributeRegistry, "error", err)
	}
	out := make([]BIOSSetting, 0, len(b.Attributes))
	for name, v := range b.Attributes {
		s := reg[name]
		s.Name, s.Value = name, BIOSText(v)
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// ApplyBIOS implements BIOSConfigurer: the values are checked against the
// registry and PATCHed to the settings object (or, for a service without
// one, to the Bios resource), asking for them on the next reset where the
// service lets the client choose.
func (d *redfishDriver) ApplyBIOS(ctx context.Context, values []BIOSValue) error {
	c, err := d.call(ctx)
	if err != nil {
		return err
	}
	if err := d.applyBIOS(c, values); err != nil {
		return fmt.Errorf("apply BIOS settings via redfish %s: %w", d.cfg.endpoint, err)
	}
	return nil
}

func (d *redfishDriver) applyBIOS(c *rfCall, values []BIOSValue) error {
	b, err := d.bios(c)
	if err != nil {
		return err
	}
	reg, err := d.attributeRegistry(c, b.AttributeRegistry)
	if err != nil {
		return fmt.Errorf("read the attribute registry to check the settings: %w", err)
	}
	attrs, err := checkBIOSValues(b.Attributes, reg, values)
	if err != nil {
		return err
	}
	body := map[string]any{"Attributes": attrs}
	if slices.Contains(b.Settings.SupportedApplyTimes, "OnReset") {
		body["@Redfish.SettingsApplyTime"] = map[string]any{"ApplyTime": "OnReset"}
	}
	target := b.Settings.SettingsObject.String()
	if target == "" {
		target = b.ODataID
	}
	d.log.Info("writing BIOS settings", "target", target, "attributes", attrs)
	resp, err := c.Patch(target, body)
	if err != nil {
		return fmt.Errorf("PATCH %s: %w", target, err)
	}
	resp.Body.Close()
	if target == b.ODataID {
		return nil
	}
	// Read back: a BMC can answer 200 and keep nothing.
	var pending rfBios
	if err := getJSON(c, target, &pending); err != nil {
		return fmt.Errorf("read back %s: %w", target, err)
	}
	if miss := biosMismatch(pending.Attributes, values); len(miss) > 0 {
		return fmt.Errorf("%w: the BMC accepted the BIOS settings but its settings object %s does not hold them (%s)",
			ErrBusy, target, strings.Join(miss, "; "))
	}
	return nil
}

// ResetBIOS implements BIOSConfigurer with the Bios.ResetBios action.
func (d *redfishDriver) ResetBIOS(ctx context.Context) error {
	c, err := d.call(ctx)
	if err != nil {
		return err
	}
	b, err := d.bios(c)
	if err != nil {
		return fmt.Errorf("reset BIOS settings via redfish %s: %w", d.cfg.endpoint, err)
	}
	if b.Actions.Reset.Target == "" {
		return fmt.Errorf("%w: reset BIOS settings via redfish %s: Bios %s offers no #Bios.ResetBios action", ErrUnsupported, d.cfg.endpoint, b.ODataID)
	}
	d.log.Info("resetting BIOS settings to defaults", "target", b.Actions.Reset.Target)
	resp, err := c.Post(b.Actions.Reset.Target, map[string]any{})
	if err != nil {
		return fmt.Errorf("reset BIOS settings via redfish %s: POST %s: %w", d.cfg.endpoint, b.Actions.Reset.Target, err)
	}
	resp.Body.Close()
	return nil
}

// VerifyBIOS implements BIOSConfigurer: the values the Bios resource does
// not hold, with the failure messages the service reports in
// @Redfish.Settings, and whether the settings object still holds values
// that differ from the current ones (the BMC has not applied them yet).
func (d *redfishDriver) VerifyBIOS(ctx context.Context, values []BIOSValue) ([]string, bool, error) {
	c, err := d.call(ctx)
	if err != nil {
		return nil, false, err
	}
	b, err := d.bios(c)
	if err != nil {
		return nil, false, fmt.Errorf("verify BIOS settings via redfish %s: %w", d.cfg.endpoint, err)
	}
	miss := biosMismatch(b.Attributes, values)
	if len(miss) == 0 {
		return nil, false, nil
	}
	for _, m := range b.Settings.Messages {
		if strings.HasSuffix(m.MessageID, "Success") {
			continue
		}
		text := m.MessageID
		if m.Message != "" {
			text += " " + m.Message
		}
		if len(m.RelatedProperties) > 0 {
			text += " (" + strings.Join(m.RelatedProperties, ", ") + ")"
		}
		miss = append(miss, "BMC reports "+text)
	}
	pending := false
	if so := b.Settings.SettingsObject.String(); so != "" {
		var p rfBios
		err := getJSON(c, so, &p)
		switch {
		case err == nil:
			for _, v := range values {
				if cur, ok := p.Attributes[v.Name]; ok && BIOSText(cur) != BIOSText(b.Attributes[v.Name]) {
					pending = true
				}
			}
		case errors.Is(err, ErrUnsupported): // some BMCs remove it once applied
		default:
			return nil, false, fmt.Errorf("verify BIOS settings via redfish %s: read %s: %w", d.cfg.endpoint, so, err)
		}
	}
	return miss, pending, nil
}
