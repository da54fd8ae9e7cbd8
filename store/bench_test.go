package store_test

import (
	"context"
	"testing"

	"github.com/ironflow/ironflow/internal/testkit/storetest"
	"github.com/ironflow/ironflow/store"
)

// seedBenchNodes bulk-inserts count nodes with realistic JSON fields in one
// statement (the benchmark measures listing, not creating).
func seedBenchNodes(b *testing.B, s *store.Store, count int) {
	b.Helper()
	_, err := s.Pool().Exec(context.Background(), `INSERT INTO nodes (uuid, name, driver, provision_state, power_state,
			conductor_group, resource_class, maintenance, boot_interface, deploy_interface, power_interface,
			management_interface, driver_info, driver_internal_info, properties, instance_info, extra, traits)
		SELECT gen_random_uuid()::text, 'node-' || g, CASE WHEN g % 2 = 0 THEN 'redfish' ELSE 'ipmi' END,
			(ARRAY['enroll', 'manageable', 'available', 'active', 'deploying', 'deploy failed'])[1 + g % 6],
			'power on', 'rack' || (g % 8), 'baremetal', g % 50 = 0, 'ipxe', 'direct', 'redfish', 'redfish',
			jsonb_build_object('redfish_address', 'https://10.0.' || (g % 250) || '.' || (g % 200) || ':443',
				'redfish_username', 'admin', 'redfish_password', 'secret', 'redfish_verify_ca', false,
				'redfish_system_id', '/redfish/v1/Systems/' || g),
			jsonb_build_object('agent_url', 'http://10.1.0.' || (g % 250) || ':9999', 'agent_last_heartbeat',
				'2025-01-01T00:00:00', 'clean_steps', jsonb_build_array(jsonb_build_object('step', 'erase_devices', 'priority', 10))),
			jsonb_build_object('cpus', 64, 'memory_mb', 262144, 'local_gb', 960, 'cpu_arch', 'x86_64',
				'capabilities', 'boot_mode:uefi'),
			jsonb_build_object('image_source', 'http://images/ubuntu.qcow2', 'root_gb', 100),
			'{}'::jsonb, ARRAY['CUSTOM_RACK_' || (g % 8)]
		FROM generate_series(1, $1) g`, count)
	if err != nil {
		b.Fatalf("seed %d nodes: %v", count, err)
	}
}

func BenchmarkListNodes(b *testing.B) {
	s := storetest.New(b)
	const nodes = 10000
	seedBenchNodes(b, s, nodes)
	ctx := context.Background()
	if _, err := s.Pool().Exec(ctx, "ANALYZE nodes"); err != nil {
		b.Fatal(err)
	}
	cases := []struct {
		name   string
		filter store.NodeFilter
		want   int
	}{
		{"all_10000_detail", store.NodeFilter{}, nodes},
		{"all_10000_brief", store.NodeFilter{Fields: []string{"name", "instance_uuid", "power_state", "provision_state", "maintenance"}}, nodes},
		{"page_1000_by_name", store.NodeFilter{Limit: 1000, SortKey: "name", SortDir: "desc"}, 1000},
		{"filter_state_driver", store.NodeFilter{ProvisionState: "available", Driver: "redfish", Limit: 1000}, 1000},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				got, err := s.ListNodes(ctx, c.filter)
				if err != nil {
					b.Fatal(err)
				}
				if c.want > 0 && len(got) != c.want {
					b.Fatalf("%d nodes, want %d", len(got), c.want)
				}
			}
		})
	}
	b.Run("page_by_marker", func(b *testing.B) {
		first, err := s.ListNodes(ctx, store.NodeFilter{Limit: 5000, SortKey: "created_at"})
		if err != nil {
			b.Fatal(err)
		}
		marker := first[len(first)-1].UUID
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := s.ListNodes(ctx, store.NodeFilter{Limit: 100, Marker: marker, SortKey: "created_at"}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("count", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := s.CountNodes(ctx, store.NodeFilter{Maintenance: ptr(false)}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
