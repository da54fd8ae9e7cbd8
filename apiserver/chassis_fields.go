package apiserver

import (
	"time"

	"github.com/ironflow/ironflow/store"
)

type (
	chassisField = field[store.Chassis, store.ChassisFilter]
	chassis      = store.Chassis
)

// chassisFields is the chassis' field table (API 1.1), in the order Ironic
// prints a chassis.
var chassisFields = []chassisField{
	{name: "uuid", since: 1, value: uuidFor(func(ch *chassis) *string { return &ch.UUID }), access: createOnly, sortable: true},
	{name: "created_at", since: 1, value: timestamp(func(ch *chassis) time.Time { return ch.CreatedAt }), sortable: true},
	{name: "updated_at", since: 1, value: optTime(func(ch *chassis) *time.Time { return ch.UpdatedAt }), sortable: true},
	{name: "description", since: 1, value: optText(func(ch *chassis) **string { return &ch.Description }, 255), access: writable, sortable: true},
	{name: "extra", since: 1, value: dict(func(ch *chassis) *map[string]any { return &ch.Extra }), access: writable},
	{name: "links", since: 1, value: links(func(ch *chassis) string { return "chassis/" + ch.UUID })},
	{name: "nodes", since: 1, value: links(func(ch *chassis) string { return "chassis/" + ch.UUID + "/nodes" })},
}

var chassisResource = newResource("chassis", chassisFields, nil)

// chassisDefaultFields are the keys of a chassis in a list without detail.
var chassisDefaultFields = []string{"uuid", "description"}
