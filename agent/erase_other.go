//go:build !linux

package agent

// nvmeSecureErase and ataSecureErase need Linux's NVMe and SG_IO ioctls.
func nvmeSecureErase(Device, bool) (string, error) { return "", errNoSecureErase }

func ataSecureErase(Device, bool) (string, error) { return "", errNoSecureErase }

// dropCache is posix_fadvise on Linux.
func dropCache(Device) {}
