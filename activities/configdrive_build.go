package activities

import (
	"encoding/json"
	"errors"
)

func buildConfigDriveISO(raw json.RawMessage) ([]byte, error) {
	return nil, errors.New("building a config drive from JSON is not available yet")
}
