package hooks

import (
	"encoding/binary"
	"encoding/hex"
	"net"
	"net/netip"
	"sort"
	"unicode/utf8"
)

// LLDP TLV types of IEEE 802.1AB's basic management set, and the
// organisationally specific sets of IEEE 802.1Q (OUI 00-80-C2, Annex D) and
// IEEE 802.3 (OUI 00-12-0F, clause 79), as Ironic's parse-lldp hook reads
// them (ironic/drivers/modules/inspector/lldp_parsers.py).
const (
	tlvEnd         = 0
	tlvChassisID   = 1
	tlvPortID      = 2
	tlvTTL         = 3
	tlvPortDesc    = 4
	tlvSysName     = 5
	tlvSysDesc     = 6
	tlvSysCaps     = 7
	tlvMgmtAddress = 8
	tlvOrgSpecific = 127

	tlvValueMaxLen = 511

	ouiDot1 = "0080c2"
	ouiDot3 = "00120f"
)

// TLV is one raw TLV as the ramdisk sends it: [type, "hex value"].
type TLV struct {
	Type  int
	Value []byte
}

// rawTLVs reads an interface's "lldp" list (or lldp_raw's): pairs of a type
// and a hex string. ok is false when any value is not hex (Ironic's
// local-link-connection hook then gives up on the interface; parse-lldp
// skips the TLV).
func rawTLVs(v any) (tlvs []TLV, bad int) {
	list, _ := v.([]any)
	for _, item := range list {
		pair, _ := item.([]any)
		if len(pair) != 2 {
			bad++
			continue
		}
		t, ok1 := pair[0].(float64)
		s, ok2 := pair[1].(string)
		b, err := hex.DecodeString(s)
		if !ok1 || !ok2 || err != nil {
			bad++
			continue
		}
		tlvs = append(tlvs, TLV{Type: int(t), Value: b})
	}
	return tlvs, bad
}

// lldpValues collects name/value pairs; the first value of a name stays
// (Ironic's set_value), lists grow (append_value).
type lldpValues map[string]any

func (nv lldpValues) set(name string, v any) {
	if _, ok := nv[name]; !ok {
		nv[name] = v
	}
}

func (nv lldpValues) add(name string, v any) {
	l, _ := nv[name].([]any)
	nv[name] = append(l, v)
}

// ParseLLDP turns an interface's TLVs into parsed_lldp's names
// (switch_chassis_id, switch_port_id, switch_system_name, ...). TLVs that
// do not parse are skipped, as Ironic does.
func ParseLLDP(tlvs []TLV) map[string]any {
	nv := lldpValues{}
	for _, t := range tlvs {
		if len(t.Value) > tlvValueMaxLen {
			continue
		}
		d := t.Value
		switch t.Type {
		case tlvChassisID:
			if v, _, ok := idValue(d, chassisSubtypes); ok {
				nv.set("switch_chassis_id", v)
			}
		case tlvPortID:
			if v, _, ok := idValue(d, portSubtypes); ok {
				nv.set("switch_port_id", v)
			}
		case tlvPortDesc, tlvSysName, tlvSysDesc:
			if !utf8.Valid(d) {
				continue
			}
			name := map[int]string{tlvPortDesc: "switch_port_description", tlvSysName: "switch_system_name", tlvSysDesc: "switch_system_description"}[t.Type]
			nv.set(name, string(d))
		case tlvSysCaps:
			if len(d) != 4 {
				continue
			}
			nv.set("switch_capabilities_support", capabilities(binary.BigEndian.Uint16(d[0:2])))
			nv.set("switch_capabilities_enabled", capabilities(binary.BigEndian.Uint16(d[2:4])))
		case tlvMgmtAddress:
			if len(d) < 2 {
				continue
			}
			if a, ok := ianaAddress(d[1], d[2:]); ok {
				nv.add("switch_mgmt_addresses", a)
			}
		case tlvOrgSpecific:
			if len(d) < 4 {
				continue
			}
			oui, sub, data := hex.EncodeToString(d[0:3]), int(d[3]), d[4:]
			switch oui {
			case ouiDot1:
				dot1(nv, sub, data)
			case ouiDot3:
				dot3(nv, sub, data)
			}
		}
	}
	return nv
}

var chassisSubtypes = map[byte]string{1: "entPhysAlias_c", 2: "ifAlias", 3: "entPhysAlias_p", 4: "mac_address", 5: "IANA_address", 6: "ifName", 7: "local"}
var portSubtypes = map[byte]string{1: "ifAlias", 2: "entPhysicalAlias", 3: "mac_address", 4: "IANA_address", 5: "ifName", 7: "local"}

// idValue decodes a chassis or port ID: a MAC address as aa:bb:cc:dd:ee:ff,
// a network address as text, anything else as its UTF-8 string.
func idValue(d []byte, subtypes map[byte]string) (value string, subtype string, ok bool) {
	if len(d) < 1 {
		return "", "", false
	}
	subtype, known := subtypes[d[0]]
	if !known {
		return "", "", false
	}
	rest := d[1:]
	switch subtype {
	case "mac_address":
		if len(rest) < 6 {
			return "", "", false
		}
		return net.HardwareAddr(rest[:6]).String(), subtype, true
	case "IANA_address":
		if len(rest) < 1 {
			return "", "", false
		}
		a, ok := ianaAddress(rest[0], rest[1:])
		return a, subtype, ok
	}
	if !utf8.Valid(rest) {
		return "", "", false
	}
	return string(rest), subtype, true
}

// ianaAddress decodes an address of IANA address family 1 (IPv4), 2 (IPv6)
// or 6 (MAC).
func ianaAddress(family byte, b []byte) (string, bool) {
	switch family {
	case 1:
		if len(b) >= 4 {
			return netip.AddrFrom4([4]byte(b[:4])).String(), true
		}
	case 2:
		if len(b) >= 16 {
			return netip.AddrFrom16([16]byte(b[:16])).String(), true
		}
	case 6:
		if len(b) >= 6 {
			return net.HardwareAddr(b[:6]).String(), true
		}
	}
	return "", false
}

// capabilities names the bits of IEEE 802.1AB's system capabilities.
func capabilities(bits uint16) []any {
	names := []struct {
		bit  uint16
		name string
	}{{1 << 1, "Repeater"}, {1 << 2, "Bridge"}, {1 << 3, "WLAN"}, {1 << 4, "Router"}, {1 << 5, "Telephone"},
		{1 << 6, "DOCSIS cable device"}, {1 << 7, "Station only"}, {1 << 8, "C-Vlan"}, {1 << 9, "S-Vlan"}, {1 << 10, "TPMR"}}
	out := []any{}
	for _, n := range names {
		if bits&n.bit != 0 {
			out = append(out, n.name)
		}
	}
	return out
}

func dot1(nv lldpValues, sub int, d []byte) {
	switch sub {
	case 1: // port VLAN ID
		if len(d) >= 2 {
			nv.set("switch_port_untagged_vlan_id", float64(binary.BigEndian.Uint16(d)))
		}
	case 2: // port and protocol VLAN ID
		if len(d) != 3 {
			return
		}
		nv.set("switch_port_protocol_vlan_enabled", d[0]&0x04 != 0)
		nv.set("switch_port_protocol_vlan_support", d[0]&0x02 != 0)
		nv.add("switch_port_protocol_vlan_ids", float64(binary.BigEndian.Uint16(d[1:3])))
	case 3: // VLAN name
		if len(d) < 3 || len(d) < 3+int(d[2]) || !utf8.Valid(d[3:3+int(d[2])]) {
			return
		}
		nv.add("switch_port_vlans", map[string]any{"name": string(d[3 : 3+int(d[2])]), "id": float64(binary.BigEndian.Uint16(d))})
	case 4: // protocol identity
		if len(d) < 1 || len(d) < 1+int(d[0]) {
			return
		}
		nv.add("switch_protocol_identities", hex.EncodeToString(d[1:1+int(d[0])]))
	case 6: // management VID
		if len(d) >= 2 {
			nv.set("switch_port_management_vlan_id", float64(binary.BigEndian.Uint16(d)))
		}
	case 7: // link aggregation
		linkAggregation(nv, d)
	}
}

func linkAggregation(nv lldpValues, d []byte) {
	if len(d) != 5 {
		return
	}
	nv.set("switch_port_link_aggregation_enabled", d[0]&0x02 != 0)
	nv.set("switch_port_link_aggregation_support", d[0]&0x01 != 0)
	nv.set("switch_port_link_aggregation_id", float64(binary.BigEndian.Uint32(d[1:5])))
}

func dot3(nv lldpValues, sub int, d []byte) {
	switch sub {
	case 1: // MAC/PHY configuration/status
		if len(d) != 5 {
			return
		}
		mau, known := mauTypes[binary.BigEndian.Uint16(d[3:5])]
		if !known {
			return // Ironic: "Invalid index for mau type", the TLV is dropped
		}
		nv.set("switch_port_autonegotiation_enabled", d[0]&0x02 != 0)
		nv.set("switch_port_autonegotiation_support", d[0]&0x01 != 0)
		nv.set("switch_port_physical_capabilities", autonegCapabilities(binary.BigEndian.Uint16(d[1:3])))
		nv.set("switch_port_mau_type", mau)
	case 3: // link aggregation (moved to 802.1, same format)
		linkAggregation(nv, d)
	case 4: // maximum frame size
		if len(d) >= 2 {
			nv.set("switch_port_mtu", float64(binary.BigEndian.Uint16(d)))
		}
	}
}

// autonegCapabilities names the bits of RFC 4836's IANAifMauAutoNegCapBits
// (most significant bit first: other, 10BASE-T, ..., 1000BASE-T fdx), sorted
// as Ironic sorts them.
func autonegCapabilities(bits uint16) []any {
	names := []string{"", "10BASE-T hdx", "10BASE-T fdx", "10BASE-T4", "100BASE-TX hdx", "100BASE-TX fdx",
		"100BASE-T2 hdx", "100BASE-T2 fdx", "PAUSE fdx", "Asym PAUSE fdx", "Sym PAUSE fdx", "Asym and Sym PAUSE fdx",
		"1000BASE-X hdx", "1000BASE-X fdx", "1000BASE-T hdx", "1000BASE-T fdx"}
	var caps []string
	for i, n := range names {
		if n != "" && bits&(1<<(15-i)) != 0 {
			caps = append(caps, n)
		}
	}
	sort.Strings(caps)
	out := make([]any, len(caps))
	for i, c := range caps {
		out[i] = c
	}
	return out
}

// mauTypes are the operational MAU types of RFC 4836 (dot3MauType), by
// index.
var mauTypes = map[uint16]string{
	0: "Unknown", 1: "AUI", 2: "10BASE-5", 3: "FOIRL", 4: "10BASE-2", 5: "10BASE-T duplex mode unknown",
	6: "10BASE-FP", 7: "10BASE-FB", 8: "10BASE-FL duplex mode unknown", 9: "10BROAD36", 10: "10BASE-T half duplex",
	11: "10BASE-T full duplex", 12: "10BASE-FL half duplex", 13: "10BASE-FL full duplex", 14: "100 BASE-T4",
	15: "100BASE-TX half duplex", 16: "100BASE-TX full duplex", 17: "100BASE-FX half duplex", 18: "100BASE-FX full duplex",
	19: "100BASE-T2 half duplex", 20: "100BASE-T2 full duplex", 21: "1000BASE-X half duplex", 22: "1000BASE-X full duplex",
	23: "1000BASE-LX half duplex", 24: "1000BASE-LX full duplex", 25: "1000BASE-SX half duplex", 26: "1000BASE-SX full duplex",
	27: "1000BASE-CX half duplex", 28: "1000BASE-CX full duplex", 29: "1000BASE-T half duplex", 30: "1000BASE-T full duplex",
	31: "10GBASE-X", 32: "10GBASE-LX4", 33: "10GBASE-R", 34: "10GBASE-ER", 35: "10GBASE-LR", 36: "10GBASE-SR",
	37: "10GBASE-W", 38: "10GBASE-EW", 39: "10GBASE-LW", 40: "10GBASE-SW", 41: "10GBASE-CX4", 42: "2BASE-TL",
	43: "10PASS-TS", 44: "100BASE-BX10D", 45: "100BASE-BX10U", 46: "100BASE-LX10", 47: "1000BASE-BX10D",
	48: "1000BASE-BX10U", 49: "1000BASE-LX10", 50: "1000BASE-PX10D", 51: "1000BASE-PX10U", 52: "1000BASE-PX20D",
	53: "1000BASE-PX20U",
}

// localLink is what the local-link-connection hook takes from LLDP: the
// switch port (port ID), the switch (chassis ID, only a MAC address) and its
// name (switch_info).
func localLink(tlvs []TLV) map[string]any {
	out := map[string]any{}
	for _, t := range tlvs {
		switch t.Type {
		case tlvPortID:
			if v, _, ok := idValue(t.Value, portSubtypes); ok {
				if _, seen := out["port_id"]; !seen {
					out["port_id"] = v
				}
			}
		case tlvChassisID:
			if v, sub, ok := idValue(t.Value, chassisSubtypes); ok && sub == "mac_address" {
				if _, seen := out["switch_id"]; !seen {
					out["switch_id"] = v
				}
			}
		case tlvSysName:
			if utf8.Valid(t.Value) {
				if _, seen := out["switch_info"]; !seen {
					out["switch_info"] = string(t.Value)
				}
			}
		}
	}
	return out
}
