package proc

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// EnvCUDAVisibleDevices is the variable that restricts the CUDA devices a
// process sees.
const EnvCUDAVisibleDevices = "CUDA_VISIBLE_DEVICES"

// DefaultCUDA is what bare "cuda" gives a child when no CUDA_VISIBLE_DEVICES
// is inherited (the seed's default_cuda).
const DefaultCUDA = "0"

// CUDAOptions tunes CUDAVisibleDevices. The zero value is the seed's
// defaults (map_inherited=True, default_cuda="0").
type CUDAOptions struct {
	// Inherited is the CUDA_VISIBLE_DEVICES the caller itself runs under.
	// nil means: look it up (in the process environment for
	// CUDAVisibleDevices, in the given env for WithCUDAVisibleDevices).
	Inherited *string
	// NoMap passes cuda:N through as "N" instead of reading N as an index
	// into the inherited list.
	NoMap bool
	// DefaultCUDA is the value bare "cuda" gives when nothing is inherited;
	// "" means DefaultCUDA ("0").
	DefaultCUDA string
}

// nonCUDADevices are device types that select no CUDA device.
var nonCUDADevices = map[string]bool{"cpu": true, "mps": true, "xpu": true, "npu": true, "hpu": true, "meta": true}

// CUDAVisibleDevices converts a device string into the CUDA_VISIBLE_DEVICES
// value for a child process (the seed's cuda_visible_devices_from_device).
// ok is false when the child should not get one (it then inherits the
// caller's). Case and surrounding spaces are ignored.
//
//   - "" (the seed's None or empty device) gives none;
//   - "cpu" (and the other non-CUDA types mps, xpu, npu, hpu, meta, with or
//     without an index) gives none;
//   - bare "cuda" gives the inherited CUDA_VISIBLE_DEVICES list unchanged
//     when one is set, so the child sees the caller's devices, and
//     opt.DefaultCUDA ("0") otherwise, so it sees one device and not every
//     device on the host;
//   - "cuda:N" is a local index into the inherited CUDA_VISIBLE_DEVICES list
//     when one is set, which is what a launcher nested under a scheduler or
//     torchrun needs: under CUDA_VISIBLE_DEVICES=4,5,6 "cuda:1" gives "5".
//     Without an inherited list, or with opt.NoMap, it gives "N".
//
// Unlike the seed, which answers None or the bare index, a CUDA device
// that cannot be honoured is an error: an index past the inherited list,
// an inherited list that is set but empty ("" hides every device from the
// caller), a malformed inherited list when mapping an index ("0,,1"), and
// an unknown or malformed device string ("gpu:0", "cuda:x", "0,1").
func CUDAVisibleDevices(device string, opt CUDAOptions) (value string, ok bool, err error) {
	if opt.Inherited == nil {
		if v, set := os.LookupEnv(EnvCUDAVisibleDevices); set {
			opt.Inherited = &v
		}
	}
	return cudaVisible(device, opt)
}

// WithCUDAVisibleDevices returns a copy of env with CUDA_VISIBLE_DEVICES set
// for device (see CUDAVisibleDevices); the inherited list is env's own entry
// unless opt.Inherited is set. When device selects no CUDA device env is
// returned unchanged (copied).
func WithCUDAVisibleDevices(env []string, device string, opt CUDAOptions) ([]string, error) {
	if opt.Inherited == nil {
		if v, set := EnvValue(env, EnvCUDAVisibleDevices); set {
			opt.Inherited = &v
		}
	}
	v, ok, err := cudaVisible(device, opt)
	if err != nil {
		return nil, err
	}
	if !ok {
		return append([]string(nil), env...), nil
	}
	return SetEnv(env, EnvCUDAVisibleDevices, v), nil
}

func cudaVisible(device string, opt CUDAOptions) (string, bool, error) {
	d := strings.ToLower(strings.TrimSpace(device))
	if d == "" {
		return "", false, nil
	}
	kind, idx, hasIdx := strings.Cut(d, ":")
	if nonCUDADevices[kind] {
		if hasIdx {
			if _, err := parseIndex(idx); err != nil {
				return "", false, fmt.Errorf("proc: device %q: %w", device, err)
			}
		}
		return "", false, nil
	}
	if kind != "cuda" {
		return "", false, fmt.Errorf("proc: unknown device %q: want cpu, cuda or cuda:N", device)
	}
	if !hasIdx {
		switch {
		case opt.Inherited == nil:
			if def := strings.TrimSpace(opt.DefaultCUDA); def != "" {
				return def, true, nil
			}
			return DefaultCUDA, true, nil
		case strings.TrimSpace(*opt.Inherited) == "":
			return "", false, fmt.Errorf("proc: device %q: %s is set but empty, so no CUDA device is visible to the caller to give the child", device, EnvCUDAVisibleDevices)
		}
		return *opt.Inherited, true, nil
	}
	n, err := parseIndex(idx)
	if err != nil {
		return "", false, fmt.Errorf("proc: device %q: %w", device, err)
	}
	if opt.NoMap || opt.Inherited == nil {
		return strconv.Itoa(n), true, nil
	}
	inherited := *opt.Inherited
	if strings.TrimSpace(inherited) == "" {
		return "", false, fmt.Errorf("proc: device %q: %s is set but empty, so no CUDA device is visible to map index %d onto", device, EnvCUDAVisibleDevices, n)
	}
	list := strings.Split(inherited, ",")
	for i, e := range list {
		list[i] = strings.TrimSpace(e)
		if list[i] == "" {
			return "", false, fmt.Errorf("proc: %s=%q has an empty entry (position %d)", EnvCUDAVisibleDevices, inherited, i)
		}
	}
	if n >= len(list) {
		return "", false, fmt.Errorf("proc: device %q is out of range: %s=%q makes %d device(s) visible (cuda:0..cuda:%d); set CUDAOptions.NoMap to pass the index through unmapped", device, EnvCUDAVisibleDevices, inherited, len(list), len(list)-1)
	}
	return list[n], true, nil
}

// parseIndex parses a device index: decimal digits only.
func parseIndex(s string) (int, error) {
	if s == "" {
		return 0, fmt.Errorf("empty device index")
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("device index %q is not a non-negative integer", s)
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > 1<<20 {
		return 0, fmt.Errorf("device index %q is out of range", s)
	}
	return n, nil
}
