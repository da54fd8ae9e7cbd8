package bmc

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ironflow/ironflow/hardware"
)

// Keys shared by the redfish and ipmi drivers, declared with the other
// driver_info keys in package hardware.
const (
	KeyPowerStateTimeout   = hardware.KeyPowerStateTimeout
	KeyPowerPollInterval   = hardware.KeyPowerPollInterval
	KeySoftPowerOffTimeout = hardware.KeySoftPowerOffTimeout
)

// Defaults for the shared keys. HPE Cray BMCs take 45–60 s to show a power
// change, so the wait is well above a minute.
const (
	DefaultPowerStateTimeout   = 120 * time.Second
	DefaultPowerPollInterval   = 2 * time.Second
	DefaultSoftPowerOffTimeout = 120 * time.Second
)

// Describe returns the driver_info keys a hardware type requires and the
// ones it understands besides, as the hardware registry declares them.
func Describe(driver string) (required, optional []string, err error) {
	t, ok := hardware.Lookup(driver)
	if !ok {
		return nil, nil, fmt.Errorf("%w: no BMC driver for hardware type %q", ErrInvalidConfig, driver)
	}
	return t.Required(), t.Optional(), nil
}

// MissingKeys returns the required driver_info keys of a hardware type that
// are absent or empty in info, in Describe's order.
func MissingKeys(driver string, info map[string]any) ([]string, error) {
	t, ok := hardware.Lookup(driver)
	if !ok {
		return nil, fmt.Errorf("%w: no BMC driver for hardware type %q", ErrInvalidConfig, driver)
	}
	return t.Missing(info), nil
}

// missingError is the ErrInvalidConfig a factory returns for absent keys;
// the text follows Ironic's "Missing the following ... properties" message.
func missingError(kind string, missing []string) error {
	return fmt.Errorf("%w: missing the following %s properties in node's driver_info: %s",
		ErrInvalidConfig, kind, strings.Join(missing, ", "))
}

// infoString reads a key as text (hardware.Text: numbers accepted, nil
// absent).
func infoString(info map[string]any, key string) (string, bool) { return hardware.Text(info, key) }

// infoBool accepts JSON booleans and the strings Ironic users write
// ("True", "false", "yes", "0").
func infoBool(info map[string]any, key string, def bool) (bool, error) {
	v, ok := info[key]
	if !ok || v == nil {
		return def, nil
	}
	if b, ok := v.(bool); ok {
		return b, nil
	}
	s, _ := infoString(info, key)
	if b, ok := parseBoolWord(s); ok {
		return b, nil
	}
	return false, fmt.Errorf("%w: %s %q is not a boolean", ErrInvalidConfig, key, s)
}

func parseBoolWord(s string) (bool, bool) {
	switch strings.ToLower(s) {
	case "true", "yes", "on", "1", "y", "t":
		return true, true
	case "false", "no", "off", "0", "n", "f":
		return false, true
	}
	return false, false
}

// infoInt reads a non-negative integer within [min, max].
func infoInt(info map[string]any, key string, def, lo, hi int) (int, error) {
	s, ok := infoString(info, key)
	if !ok || s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%w: %s %q is not an integer between %d and %d", ErrInvalidConfig, key, s, lo, hi)
	}
	return n, nil
}

// infoDuration reads seconds (Ironic's unit: 60, "60", "0.5") or a Go
// duration ("1m30s"). Zero or negative values are refused: a timeout of
// zero would make every call fail.
func infoDuration(info map[string]any, key string, def time.Duration) (time.Duration, error) {
	s, ok := infoString(info, key)
	if !ok || s == "" {
		return def, nil
	}
	var d time.Duration
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		d = time.Duration(f * float64(time.Second))
	} else if d, err = time.ParseDuration(s); err != nil {
		return 0, fmt.Errorf("%w: %s %q is neither seconds nor a duration", ErrInvalidConfig, key, s)
	}
	if d <= 0 {
		return 0, fmt.Errorf("%w: %s %q must be positive", ErrInvalidConfig, key, s)
	}
	return d, nil
}

// powerTiming holds the shared power-wait settings of a node.
type powerTiming struct {
	stateTimeout   time.Duration
	pollInterval   time.Duration
	softOffTimeout time.Duration
}

func parsePowerTiming(info map[string]any) (powerTiming, error) {
	var p powerTiming
	var err error
	if p.stateTimeout, err = infoDuration(info, KeyPowerStateTimeout, DefaultPowerStateTimeout); err != nil {
		return p, err
	}
	if p.pollInterval, err = infoDuration(info, KeyPowerPollInterval, DefaultPowerPollInterval); err != nil {
		return p, err
	}
	if p.softOffTimeout, err = infoDuration(info, KeySoftPowerOffTimeout, DefaultSoftPowerOffTimeout); err != nil {
		return p, err
	}
	return p, nil
}

// fileExists tells a CA bundle path from a mistyped boolean.
func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir()
}
