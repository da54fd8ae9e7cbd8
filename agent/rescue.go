package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/ironflow/ironflow/shadow"
)

// RescueUser is the account rescue.finalize_rescue sets the password of, as
// IPA's rescue mode names it.
var RescueUser = shadow.User{Name: "rescue", UID: 1000, GID: 1000, Home: "/", Shell: "/bin/sh"}

// Rescuer is hardware on which the agent can set up the rescue user: it
// writes the user's account with the password's crypt(3) hash. Hardware
// without it refuses rescue.
type Rescuer interface {
	SetRescueUser(ctx context.Context, hash string) error
}

// errNoRescue: the hardware cannot hold a rescue user.
var errNoRescue = errors.New("this agent's hardware cannot set up a rescue user")

// rescueStopDelay lets the answer of finalize_rescue reach the control
// plane before the agent stops serving its API.
const rescueStopDelay = 500 * time.Millisecond

// finalizeRescue is IPA's rescue.finalize_rescue: params rescue_password
// and hashed (Ironic sends the hash, hashed true; a clear password is
// hashed here). Once the user is set the agent stops heartbeating and
// serving its API, so that nothing of it is reachable from the rescued
// machine's network: the node stays in rescue. The disks are not touched.
func (a *Agent) finalizeRescue(ctx context.Context, _ *command, params json.RawMessage) (any, error) {
	var p struct {
		RescuePassword string `json:"rescue_password"`
		Hashed         bool   `json:"hashed"`
	}
	if err := decodeParams(params, &p); err != nil {
		return nil, err
	}
	if p.RescuePassword == "" {
		return nil, newRESTError("InvalidCommandParamsError", 400, "Invalid command parameters", "rescue_password is required")
	}
	hash := p.RescuePassword
	if !p.Hashed {
		var err error
		if hash, err = shadow.Hash(p.RescuePassword); err != nil {
			return nil, err
		}
	}
	if !shadow.IsHash(hash) {
		return nil, newRESTError("InvalidCommandParamsError", 400, "Invalid command parameters", "rescue_password is not a SHA-512 crypt hash ($6$)")
	}
	r, ok := a.cfg.Hardware.(Rescuer)
	if !ok {
		return nil, errNoRescue
	}
	if err := r.SetRescueUser(ctx, hash); err != nil {
		return nil, fmt.Errorf("set the password of user %s: %w", RescueUser.Name, err)
	}
	a.rescued.Store(true)
	a.log.Info("rescue: the rescue user is set up; the agent stops heartbeating and serving its API", "node", a.NodeUUID(), "user", RescueUser.Name)
	go func() {
		time.Sleep(rescueStopDelay)
		a.cancel()
	}()
	return nil, nil
}

// Rescued reports whether finalize_rescue set up the rescue user (the agent
// then stops).
func (a *Agent) Rescued() bool { return a.rescued.Load() }
