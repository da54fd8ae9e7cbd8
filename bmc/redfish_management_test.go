package bmc

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// TestRedfishNMIAndIndicatorsOnRecordedServices: on DMTF's rackmount and
// HPE's iLO 5 recordings, the NMI is a ComputerSystem.Reset with ResetType
// Nmi; the indicators are the chassis' and the system's IndicatorLED
// (the chassis, which has no UUID, named by its Id; the system by its
// UUID) read in Ironic's words, and a set PATCHes IndicatorLED with
// Redfish's value; an unknown indicator is ErrUnknownIndicator and
// nothing is sent.
func TestRedfishNMIAndIndicatorsOnRecordedServices(t *testing.T) {
	for _, c := range []struct {
		dir, system, chassis, chassisState string
		systemURI, chassisURI              string
	}{
		{"dmtf-public-rackmount1", "38947555-7742-3448-3784-823347823834", "1U", IndicatorOn,
			"/redfish/v1/Systems/437XR1138R2", "/redfish/v1/Chassis/1U"},
		{"hpe-ilo-dl325", "36383150-3630-584D-5130-313930323042", "1", IndicatorOff,
			"/redfish/v1/Systems/1", "/redfish/v1/Chassis/1"},
	} {
		t.Run(c.dir, func(t *testing.T) {
			b := startBMC(t, c.dir, nil)
			d, err := New("redfish", b.info(nil))
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			ctx := context.Background()
			if err := d.(NMIInjector).InjectNMI(ctx); err != nil {
				t.Fatalf("inject NMI: %v", err)
			}
			lights := d.(IndicatorLights)
			all, err := lights.Indicators(ctx)
			if err != nil {
				t.Fatal(err)
			}
			ch, okC := FindIndicator(all, ComponentChassis, c.chassis)
			sys, okS := FindIndicator(all, ComponentSystem, c.system)
			if !okC || !okS || ch.State != c.chassisState || sys.State != IndicatorOff || sys.Readonly ||
				!slices.Equal(sys.States, []string{IndicatorBlinking, IndicatorOff, IndicatorOn}) {
				t.Fatalf("indicators: %+v", all)
			}
			if err := lights.SetIndicator(ctx, ComponentSystem, c.system, IndicatorBlinking); err != nil {
				t.Fatal(err)
			}
			if err := lights.SetIndicator(ctx, ComponentChassis, c.chassis, IndicatorOff); err != nil {
				t.Fatal(err)
			}
			if err := lights.SetIndicator(ctx, ComponentDisk, "nope", IndicatorOn); !errors.Is(err, ErrUnknownIndicator) {
				t.Errorf("unknown indicator: %v", err)
			}
			want := []string{"Reset Nmi", "IndicatorLED " + c.systemURI + " Blinking", "IndicatorLED " + c.chassisURI + " Off"}
			if got := b.actionLog(); !slices.Equal(got, want) {
				t.Errorf("the BMC was asked %q, want %q", got, want)
			}
			all, _ = lights.Indicators(ctx)
			if sys, _ := FindIndicator(all, ComponentSystem, c.system); sys.State != IndicatorBlinking {
				t.Errorf("system reads %s after set blinking", sys.State)
			}
		})
	}
}
