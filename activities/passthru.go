package activities

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/bmc"
	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/pyliteral"
	"github.com/ironflow/ironflow/workflows"
)

// subscriptionFields are the properties of an EventDestination that the
// redfish vendor interface returns (Ironic's SUBSCRIPTION_COMMON_FIELDS):
// HttpHeaders and every vendor property are left out.
var subscriptionFields = []string{"Id", "Context", "Protocol", "Destination", "EventTypes"}

func filterSubscription(doc map[string]any) map[string]any {
	out := map[string]any{}
	for _, k := range subscriptionFields {
		if v, ok := doc[k]; ok {
			out[k] = v
		}
	}
	return out
}

// vendorErr is a vendor method's failure as the API answers it: typ picks
// Ironic's status (workflows.ErrTypeVendor*), msg is the faultstring. A
// vendor method is not repeated by Temporal: the BMC client retries what is
// transient, and a create must not be sent twice.
func vendorErr(typ, format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), typ, nil)
}

// redfishErr words a BMC failure as Ironic's RedfishError does. Ironic
// answers 500 (404 for delete_subscription) whatever the BMC said; when
// the BMC refused the request itself (400) or found no such subscription
// (404), the client's request was wrong, and the API answers with the
// BMC's status instead (docs/api-versions.md).
func redfishErr(typ string, bmcErr error, format string, args ...any) error {
	var he *bmc.HTTPError
	if errors.As(bmcErr, &he) {
		switch he.Status {
		case http.StatusBadRequest:
			typ = workflows.ErrTypeVendorInvalid
		case http.StatusNotFound:
			typ = workflows.ErrTypeVendorNotFound
		}
	}
	return vendorErr(typ, "Redfish exception occurred. Error: "+format, args...)
}

// CallVendorMethod runs a method of the node's vendor interface on its BMC
// (the redfish vendor interface, ironic/drivers/modules/redfish/vendor.py):
// the checks that need the BMC (the event types it takes, the media types
// of its devices) and the call. The API has checked the rest.
func (a *Activities) CallVendorMethod(ctx context.Context, in workflows.VendorMethodInput) (any, error) {
	n, d, err := a.nodeDriver(ctx, in.Node)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	node := in.Node.UUID
	if in.Method == hardware.VendorEjectVmedia {
		return nil, a.ejectVmedia(ctx, d, node, in.Args)
	}
	ev, ok := d.(bmc.EventSubscriber)
	if !ok {
		return nil, vendorErr(workflows.ErrTypeVendorInvalid, "Driver %s does not support vendor passthru method %s (disabled or not implemented).", n.Driver, in.Method)
	}
	id, _ := in.Args["id"].(string)
	switch in.Method {
	case hardware.VendorCreateSubscription:
		var headers any
		if in.SecretKey != "" {
			var ok bool
			if headers, ok = n.DriverInternalInfo[in.SecretKey]; !ok {
				return nil, redfishErr(workflows.ErrTypeVendorFailed, nil, "Failed to create subscription on node %s: its HttpHeaders are no longer there to send.", node)
			}
			// The headers are the destination's secret: gone from the
			// node whatever the BMC answers.
			defer func() {
				if err := a.Store.DeleteDriverInternalInfoKeys(context.WithoutCancel(ctx), node, in.SecretKey); err != nil {
					a.Log.Error("could not remove the HttpHeaders of a subscription", "node", node, "error", err)
				}
			}()
		}
		return createSubscription(ctx, ev, node, in.Args, headers)
	case hardware.VendorDeleteSubscription:
		if err := ev.DeleteSubscription(ctx, id); err != nil {
			return nil, redfishErr(workflows.ErrTypeVendorNotFound, err, "Redfish delete_subscription failed for subscription %s on node %s. Error: %s", id, node, err)
		}
		return nil, nil
	case hardware.VendorGetSubscription:
		doc, err := ev.Subscription(ctx, id)
		if err != nil {
			return nil, redfishErr(workflows.ErrTypeVendorFailed, err, "Redfish get_subscription failed for subscription %s on node %s. Error: %s", id, node, err)
		}
		return filterSubscription(doc), nil
	case hardware.VendorGetAllSubscriptions:
		doc, err := ev.Subscriptions(ctx)
		if err != nil {
			return nil, redfishErr(workflows.ErrTypeVendorFailed, err, "Redfish get_subscriptions failed for node %s. Error: %s", node, err)
		}
		return doc, nil
	}
	return nil, vendorErr(workflows.ErrTypeVendorInvalid, "No handler for method %s", in.Method)
}

// createSubscription checks EventTypes against those the BMC takes, then
// sends Ironic's payload: the Redfish defaults for what the client left
// out (Protocol Redfish, an empty Context, EventTypes [Alert]), HttpHeaders
// only when there are some.
func createSubscription(ctx context.Context, ev bmc.EventSubscriber, node string, args map[string]any, headers any) (any, error) {
	if types, ok := args["EventTypes"]; ok && types != nil {
		allowed, err := ev.EventTypes(ctx)
		if err != nil {
			return nil, redfishErr(workflows.ErrTypeVendorFailed, err, "Failed to read the event types of node %s. Error: %s", node, err)
		}
		list, isList := types.([]any)
		valid := isList
		for _, t := range list {
			s, ok := t.(string)
			valid = valid && ok && slices.Contains(allowed, s)
		}
		if !valid {
			set := make([]string, len(allowed))
			for i, s := range allowed {
				set[i] = pyliteral.Repr(s)
			}
			return nil, vendorErr(workflows.ErrTypeVendorInvalid, "EventTypes %s is not a valid value, allowed values {%s}", pyliteral.ReprDecoded(types), strings.Join(set, ", "))
		}
	}
	payload := map[string]any{"Destination": args["Destination"], "Protocol": "Redfish", "Context": "", "EventTypes": []any{"Alert"}}
	for _, k := range []string{"Protocol", "Context", "EventTypes"} {
		if v, ok := args[k]; ok {
			payload[k] = v
		}
	}
	// What the message shows of the payload, in Ironic's key order, the
	// headers masked: the message is kept in the workflow's history.
	shown := fmt.Sprintf("{'Destination': %s, 'Protocol': %s, 'Context': %s, 'EventTypes': %s",
		pyliteral.ReprDecoded(payload["Destination"]), pyliteral.ReprDecoded(payload["Protocol"]),
		pyliteral.ReprDecoded(payload["Context"]), pyliteral.ReprDecoded(payload["EventTypes"]))
	if h, ok := headers.([]any); ok && len(h) > 0 {
		payload["HttpHeaders"] = h
		shown += ", 'HttpHeaders': '******'"
	}
	shown += "}"
	doc, err := ev.CreateSubscription(ctx, payload)
	if err != nil {
		return nil, redfishErr(workflows.ErrTypeVendorFailed, err, "Failed to create subscription on node %s. Subscription payload: %s. Error: %s", node, shown, err)
	}
	return filterSubscription(doc), nil
}

// sushyMediaTypes are sushy's names of Redfish's MediaTypes, the words
// eject_vmedia's boot_device is checked against.
var sushyMediaTypes = map[string]string{"CD": "cd", "DVD": "dvd", "Floppy": "floppy", "USBStick": "usb"}

// ejectVmedia is Ironic's eject_vmedia: a boot_device must be a media type
// of every virtual media device (Ironic's check, device by device); the
// driver then ejects its virtual CD, the one device ironflow inserts into,
// when boot_device is absent, cd or dvd.
func (a *Activities) ejectVmedia(ctx context.Context, d bmc.Driver, node string, args map[string]any) error {
	dev, _ := args["boot_device"].(string)
	if dev != "" {
		r, ok := d.(bmc.MediaReader)
		if !ok {
			return vendorErr(workflows.ErrTypeVendorInvalid, "Boot device %s is not a valid value ", dev)
		}
		devs, err := r.ReadMedia(ctx)
		if err != nil {
			return redfishErr(workflows.ErrTypeVendorFailed, err, "Failed to read the virtual media of node %s. Error: %s", node, err)
		}
		for _, m := range devs {
			var types []string
			for _, t := range m.MediaTypes {
				types = append(types, sushyMediaTypes[t])
			}
			if !slices.Contains(types, dev) {
				return vendorErr(workflows.ErrTypeVendorInvalid, "Boot device %s is not a valid value ", dev)
			}
		}
		if dev != "cd" && dev != "dvd" {
			return nil
		}
	}
	if err := d.EjectMedia(ctx); err != nil {
		return redfishErr(workflows.ErrTypeVendorFailed, err, "Failed to eject virtual media on node %s. Error: %s", node, err)
	}
	return nil
}
