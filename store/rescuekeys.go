package store

// Keys of instance_info that hold a rescue password. ironflow stores only
// the hash (the API hashes rescue_password before it stores it), which
// every view masks; the clear key is removed too, should a client have
// written it itself.
const (
	KeyHashedRescuePassword = "hashed_rescue_password"
	KeyRescuePassword       = "rescue_password"
)
