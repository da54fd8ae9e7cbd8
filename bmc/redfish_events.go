package bmc

import (
	"context"
	"fmt"
	"strings"

	"github.com/stmcginnis/gofish/common"
	"github.com/stmcginnis/gofish/redfish"
)

// EventSubscriber is a Driver that manages the event subscriptions of the
// BMC's Redfish EventService (DMTF's EventService and EventDestination
// schemas), as Ironic's redfish vendor interface does for Metal3's
// BMCEventSubscription. Documents are handed back as the BMC wrote them;
// callers pick the properties they show.
type EventSubscriber interface {
	// EventTypes are the service's EventTypesForSubscription.
	EventTypes(ctx context.Context) ([]string, error)
	// CreateSubscription posts payload (an EventDestination: Destination,
	// EventTypes, Context, Protocol, HttpHeaders) to the Subscriptions
	// collection and reads the subscription the BMC made.
	CreateSubscription(ctx context.Context, payload map[string]any) (map[string]any, error)
	// Subscriptions reads the Subscriptions collection document.
	Subscriptions(ctx context.Context) (map[string]any, error)
	// Subscription reads the subscription id of the collection.
	Subscription(ctx context.Context, id string) (map[string]any, error)
	// DeleteSubscription deletes the subscription id of the collection.
	DeleteSubscription(ctx context.Context, id string) error
}

var _ EventSubscriber = (*redfishDriver)(nil)

// eventService reads the service root's EventService through gofish.
func (d *redfishDriver) eventService(c *rfCall) (*redfish.EventService, error) {
	var root struct{ EventService common.Link }
	if err := getJSON(c, "/redfish/v1/", &root); err != nil {
		return nil, fmt.Errorf("read service root: %w", err)
	}
	if root.EventService == "" {
		return nil, fmt.Errorf("%w: the service root links no EventService", ErrUnsupported)
	}
	es, err := redfish.GetEventService(c, root.EventService.String())
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", root.EventService, err)
	}
	if es.Subscriptions == "" {
		return nil, fmt.Errorf("%w: %s links no Subscriptions", ErrUnsupported, root.EventService)
	}
	return es, nil
}

// subscriptionPath is the member id of the collection. Some BMCs write the
// collection's link without its trailing slash, some with it: Ironic adds
// the separator only when it is missing, and so does this.
func subscriptionPath(collection, id string) string {
	if strings.HasSuffix(collection, "/") {
		return collection + id
	}
	return collection + "/" + id
}

func (d *redfishDriver) withEvents(ctx context.Context, what string, fn func(c *rfCall, es *redfish.EventService) error) error {
	c, err := d.call(ctx)
	if err != nil {
		return err
	}
	es, err := d.eventService(c)
	if err == nil {
		err = fn(c, es)
	}
	if err != nil {
		return fmt.Errorf("%s via redfish %s: %w", what, d.cfg.endpoint, err)
	}
	return nil
}

func (d *redfishDriver) EventTypes(ctx context.Context) ([]string, error) {
	var out []string
	err := d.withEvents(ctx, "read event types", func(c *rfCall, es *redfish.EventService) error {
		for _, t := range es.EventTypesForSubscription {
			out = append(out, string(t))
		}
		return nil
	})
	return out, err
}

// CreateSubscription posts the payload as given: gofish's own
// CreateEventDestination sends HttpHeaders as an object and refuses an
// empty Context, where the Redfish schema has an array of header objects
// and Ironic sends an empty Context.
func (d *redfishDriver) CreateSubscription(ctx context.Context, payload map[string]any) (map[string]any, error) {
	var out map[string]any
	err := d.withEvents(ctx, "create event subscription", func(c *rfCall, es *redfish.EventService) error {
		resp, err := c.Post(es.Subscriptions, payload)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		loc := resp.Header.Get("Location")
		if loc == "" {
			return fmt.Errorf("%w: POST %s answered HTTP %d without a Location", ErrUnsupported, es.Subscriptions, resp.StatusCode)
		}
		if i := strings.Index(loc, "/redfish/"); i > 0 && strings.Contains(loc[:i], "://") {
			loc = loc[i:] // an absolute Location: the same service
		}
		return getJSON(c, loc, &out)
	})
	return out, err
}

func (d *redfishDriver) Subscriptions(ctx context.Context) (map[string]any, error) {
	var out map[string]any
	err := d.withEvents(ctx, "list event subscriptions", func(c *rfCall, es *redfish.EventService) error {
		return getJSON(c, es.Subscriptions, &out)
	})
	return out, err
}

func (d *redfishDriver) Subscription(ctx context.Context, id string) (map[string]any, error) {
	var out map[string]any
	err := d.withEvents(ctx, "read event subscription "+id, func(c *rfCall, es *redfish.EventService) error {
		return getJSON(c, subscriptionPath(es.Subscriptions, id), &out)
	})
	return out, err
}

// DeleteSubscription reads the subscription first, as Ironic does (sushy's
// get_member), so that an unknown id is the BMC's 404 on a read rather
// than whatever its DELETE answers.
func (d *redfishDriver) DeleteSubscription(ctx context.Context, id string) error {
	return d.withEvents(ctx, "delete event subscription "+id, func(c *rfCall, es *redfish.EventService) error {
		p := subscriptionPath(es.Subscriptions, id)
		var doc map[string]any
		if err := getJSON(c, p, &doc); err != nil {
			return err
		}
		return es.DeleteEventSubscription(p)
	})
}
