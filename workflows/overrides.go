package workflows

import (
	"fmt"
	"strconv"
	"time"
)

// Per-node policy overrides in driver_info, in seconds. The worker applies
// them to the node's Policy; the API reads the heartbeat timeout to pace
// its heartbeat signals and to tell the agent.
const (
	DriverInfoCallbackTimeout     = "deploy_callback_timeout"
	DriverInfoHeartbeatTimeout    = "ramdisk_heartbeat_timeout"
	DriverInfoOperatorWaitTimeout = "operator_wait_timeout"
	// DriverInfoRescueCallbackTimeout bounds rescue wait (Ironic's
	// [conductor]rescue_callback_timeout).
	DriverInfoRescueCallbackTimeout = "rescue_callback_timeout"
)

// DriverInfoSeconds reads the override key of driver_info: ok is false
// when the node does not set it, err says why a set value is unusable.
func DriverInfoSeconds(driverInfo map[string]any, key string) (d time.Duration, ok bool, err error) {
	v, ok := driverInfo[key]
	if !ok {
		return 0, false, nil
	}
	secs, perr := strconv.ParseFloat(fmt.Sprint(v), 64)
	if perr != nil || secs <= 0 {
		return 0, true, fmt.Errorf("%s must be a positive number of seconds, got %v", key, v)
	}
	return time.Duration(secs * float64(time.Second)), true, nil
}
