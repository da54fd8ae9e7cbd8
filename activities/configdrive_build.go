package activities

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/ironflow/ironflow/configdrive"
)

// buildConfigDriveISO builds the config-2 ISO from Ironic's JSON form
// (meta_data, user_data, network_data, vendor_data), as the conductor does.
func buildConfigDriveISO(raw json.RawMessage) ([]byte, error) {
	d, err := configdrive.FromJSONForm(raw)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := configdrive.Build(&buf, d); err != nil {
		return nil, fmt.Errorf("build config-2 ISO: %w", err)
	}
	return buf.Bytes(), nil
}
