package agent

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/agent/client"
)

func softwareRAIDConfig(lds ...map[string]any) map[string]any {
	list := make([]any, len(lds))
	for i, ld := range lds {
		list[i] = ld
	}
	return map[string]any{"logical_disks": list}
}

func TestParseRAIDConfigRefusesWhatIPARefuses(t *testing.T) {
	for _, c := range []struct {
		cfg  map[string]any
		want string
	}{
		{map[string]any{}, "No target_raid_config"},
		{softwareRAIDConfig(map[string]any{"raid_level": "1", "size_gb": "MAX"}), "'controller'='software'"},
		{softwareRAIDConfig(map[string]any{"raid_level": "1", "size_gb": "MAX", "controller": "RAID.Integrated.1-1"}), "'controller'='software'"},
		{softwareRAIDConfig(map[string]any{"raid_level": "2", "size_gb": "MAX", "controller": "software"}), `raid_level "2"`},
		{softwareRAIDConfig(map[string]any{"raid_level": "1", "size_gb": "MAX", "controller": "software"},
			map[string]any{"raid_level": "0", "size_gb": 10.0, "controller": "software"}), "Only the last logical disk"},
		{softwareRAIDConfig(map[string]any{"raid_level": "0", "size_gb": "MAX", "controller": "software"}), "RAID-1 for the first logical disk"},
		{softwareRAIDConfig(map[string]any{"raid_level": "1", "size_gb": 1.0, "controller": "software"},
			map[string]any{"raid_level": "1", "size_gb": 1.0, "controller": "software"},
			map[string]any{"raid_level": "1", "size_gb": "MAX", "controller": "software"}), "maximum of two logical disks"},
		{softwareRAIDConfig(map[string]any{"raid_level": "1", "size_gb": "HALF", "controller": "software"}), "neither a number nor MAX"},
		{softwareRAIDConfig(map[string]any{"raid_level": "1", "size_gb": "MAX", "controller": "software", "physical_disks": []any{"0:1:0"}}), "root device hints"},
	} {
		if _, err := parseRAIDConfig(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("parseRAIDConfig(%v) = %v, want %q", c.cfg, err, c.want)
		}
	}
	vols, err := parseRAIDConfig(softwareRAIDConfig(
		map[string]any{"raid_level": "1", "size_gb": 10.0, "controller": "software", "is_root_volume": true, "volume_name": "root"},
		map[string]any{"raid_level": 0.0, "size_gb": "MAX", "controller": "software"}))
	if err != nil {
		t.Fatal(err)
	}
	want := []raidVolume{{Name: "root", Level: "1", SizeGiB: 10, Root: true, Controller: "software"}, {Level: "0", Controller: "software"}}
	if !reflect.DeepEqual(vols, want) {
		t.Fatalf("volumes %+v, want %+v", vols, want)
	}
}

func TestPlanSoftwareRAIDLayout(t *testing.T) {
	disks := []BlockDevice{{Name: "/dev/vda", Size: 20 << 30, Serial: "A"}, {Name: "/dev/vdb", Size: 20 << 30, Serial: "B"}, {Name: "/dev/vdc", Size: 30 << 30, Serial: "C"}}
	vols := []raidVolume{{Level: "1", SizeGiB: 10}, {Level: "0"}}
	// BIOS: a BIOS boot partition from 1 to 8 MiB, the RAID partitions
	// after it, MAX taking the rest of each disk (before the backup GPT).
	l, err := planSoftwareRAID(vols, disks[:2], "bios")
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Holders) != 2 || len(l.Partitions[0]) != 3 {
		t.Fatalf("layout %+v", l)
	}
	p := l.Partitions[1]
	if p[0].Role != partNameBIOSBoot || p[0].Start != mib || p[0].Size != 7*mib ||
		p[1].Number != 2 || p[1].Start != 8*mib || p[1].Size != 10<<30 ||
		p[2].Number != 3 || p[2].Start != 8*mib+10<<30 || p[2].Start+p[2].Size != (20<<30-33*sectorSize)/mib*mib {
		t.Fatalf("partitions of vdb %+v", p)
	}
	// UEFI: no BIOS boot partition, 129 MiB left for the EFI system
	// partition.
	l, err = planSoftwareRAID(vols, disks[:2], "uefi")
	if err != nil {
		t.Fatal(err)
	}
	if p := l.Partitions[0]; len(p) != 2 || p[0].Number != 1 || p[0].Start != 129*mib {
		t.Fatalf("UEFI partitions %+v", p)
	}
	// physical_disks chooses the holders by root device hints.
	l, err = planSoftwareRAID([]raidVolume{{Level: "1", Disks: []map[string]any{{"serial": "C"}, {"name": "/dev/vda"}}}}, disks, "bios")
	if err != nil {
		t.Fatal(err)
	}
	if l.Holders[0].Name != "/dev/vdc" || l.Holders[1].Name != "/dev/vda" {
		t.Fatalf("holders %+v", l.Holders)
	}
	if _, err := planSoftwareRAID([]raidVolume{{Level: "1"}}, disks[:1], "bios"); err == nil || !strings.Contains(err.Error(), "needs at least 2 disks") {
		t.Fatalf("one disk: %v", err)
	}
	if _, err := planSoftwareRAID([]raidVolume{{Level: "1", SizeGiB: 25}}, disks[:2], "bios"); err == nil || !strings.Contains(err.Error(), "does not fit") {
		t.Fatalf("too large: %v", err)
	}
}

func TestMdadmCreateArgsAndPartitionNames(t *testing.T) {
	got := mdadmCreateArgs("/dev/md0", raidVolume{Level: "1+0", Name: "data"}, []string{"/dev/sda2", "/dev/sdb2", "/dev/sdc2", "/dev/sdd2"})
	want := "--create /dev/md0 --force --run --metadata=1 --level 10 --name data --raid-devices 4 /dev/sda2 /dev/sdb2 /dev/sdc2 /dev/sdd2"
	if strings.Join(got, " ") != want {
		t.Fatalf("mdadm %s", strings.Join(got, " "))
	}
	for disk, want := range map[string]string{"/dev/vda": "/dev/vda2", "/dev/loop3": "/dev/loop3p2", "/dev/nvme0n1": "/dev/nvme0n1p2"} {
		if got := partitionPath(disk, 2); got != want {
			t.Errorf("partitionPath(%s) = %s, want %s", disk, got, want)
		}
	}
}

// TestRAIDStepsOnlyForTheAgentRAIDInterface: the agent offers
// raid.create_configuration and raid.delete_configuration (priority 0) to
// a node whose raid_interface is agent, and to no other: another raid
// interface runs its own steps of those names.
func TestRAIDStepsOnlyForTheAgentRAIDInterface(t *testing.T) {
	api := newFakeAPI(t)
	_, c := startAgent(t, api, newFileHardware(t, 8<<20), nil)
	ctx := context.Background()
	for _, c2 := range []struct {
		node map[string]any
		want bool
	}{{map[string]any{"uuid": "n", "raid_interface": "agent"}, true}, {map[string]any{"uuid": "n", "raid_interface": "redfish"}, false}} {
		list, err := c.GetCleanSteps(ctx, c2.node, nil)
		if err != nil {
			t.Fatal(err)
		}
		var raid []string
		for _, s := range list.Steps {
			if s.Interface == "raid" {
				if s.Priority != 0 {
					t.Errorf("%s priority %d", s.Step, s.Priority)
				}
				raid = append(raid, s.Step)
			}
		}
		if got := strings.Join(raid, " ") == "create_configuration delete_configuration"; got != c2.want {
			t.Errorf("raid_interface %v: raid steps %v", c2.node["raid_interface"], raid)
		}
	}
	// Asked of a node on another raid interface, the step is unknown.
	r, err := c.ExecuteCleanStep(ctx, client.Step{Step: "create_configuration", Interface: "raid"}, map[string]any{"uuid": "n", "raid_interface": "no-raid"}, nil)
	if err == nil {
		r, err = c.WaitCommand(ctx, r.ID, 10*time.Millisecond, nil)
	}
	if err == nil || !strings.Contains(err.Error(), "Could not find method: create_configuration") {
		t.Fatalf("create_configuration on raid_interface no-raid: %+v %v", r, err)
	}
}
