package pxe

import (
	"errors"
	"strconv"
	"strings"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv6"

	"github.com/ironflow/ironflow/metrics"
)

// observeDHCPReply counts a DHCP reply sent, by its message type (offer,
// ack, nak: RFC 2131's DHCPOFFER, DHCPACK, DHCPNAK).
func observeDHCPReply(reply *dhcpv4.DHCPv4) {
	metrics.DHCPReplies.WithLabelValues(strings.ToLower(reply.MessageType().String())).Inc()
}

// observeDHCPv6Reply counts a DHCPv6 reply sent in the same counter, by
// its message type (advertise, reply, relay-repl: RFC 8415's).
func observeDHCPv6Reply(reply []byte) {
	if len(reply) == 0 {
		return
	}
	metrics.DHCPReplies.WithLabelValues(strings.ToLower(dhcpv6.MessageType(reply[0]).String())).Inc()
}

// observeTFTP counts a TFTP read request by outcome.
func observeTFTP(err error) {
	outcome := "ok"
	switch {
	case err == nil:
	case err.Error() == "file not found", errors.Is(err, errTFTPPath):
		outcome = "not_found"
	default:
		outcome = "error"
	}
	metrics.TFTPTransfers.WithLabelValues(outcome).Inc()
}

// observeBootHTTP counts an answer of the HTTP boot service by the kind of
// file its path names (never the path: it carries node UUIDs) and its
// status, with the bytes sent.
func observeBootHTTP(path string, status int, bytes int64) {
	if status == 0 {
		status = 200
	}
	kind := "other"
	switch {
	case strings.HasPrefix(path, "/boot/") && strings.HasSuffix(path, "/boot.ipxe"):
		kind = "ipxe"
	case strings.HasPrefix(path, "/boot/") && strings.HasSuffix(path, "/ks.cfg"):
		kind = "kickstart"
	case strings.HasPrefix(path, "/images/"):
		kind = "images"
	case strings.HasPrefix(path, "/iso/"):
		kind = "iso"
	case strings.HasPrefix(path, "/cache/"):
		kind = "cache"
	}
	metrics.BootHTTPRequests.WithLabelValues(kind, strconv.Itoa(status)).Inc()
	metrics.BootHTTPSentBytes.WithLabelValues(kind).Add(float64(bytes))
}
