package payload

import (
	"context"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/proxy"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// DecodeMessage opens, in place, every encrypted payload inside msg (a
// history event, a whole history): what an operator's tool reads after the
// codec server, without one. Search attributes are not payloads the codec
// wrote and are left alone.
func DecodeMessage(ctx context.Context, c *Codec, msg proto.Message) error {
	return proxy.VisitPayloads(ctx, msg, proxy.VisitPayloadsOptions{
		SkipSearchAttributes: true,
		Visitor: func(_ *proxy.VisitPayloadsContext, ps []*commonpb.Payload) ([]*commonpb.Payload, error) {
			return c.Decode(ps)
		},
	})
}

// DecodeHistoryJSON opens the encrypted payloads of a history as
// `temporal workflow show --output json` prints it and prints it again in
// the same form.
func DecodeHistoryJSON(ctx context.Context, c *Codec, raw []byte) ([]byte, error) {
	var h historypb.History
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(raw, &h); err != nil {
		return nil, fmt.Errorf("read history JSON: %w", err)
	}
	if err := DecodeMessage(ctx, c, &h); err != nil {
		return nil, err
	}
	return protojson.Marshal(&h)
}
