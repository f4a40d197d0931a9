package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// byteUnits are the units -model-memory takes: decimal (k, M, G, T, as
// Kubernetes' quantities; with or without a trailing B) and binary (Ki,
// Mi, Gi, Ti; with or without a trailing B), case-insensitive.
var byteUnits = map[string]float64{
	"": 1, "b": 1,
	"k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9, "t": 1e12, "tb": 1e12,
	"ki": 1 << 10, "kib": 1 << 10, "mi": 1 << 20, "mib": 1 << 20, "gi": 1 << 30, "gib": 1 << 30, "ti": 1 << 40, "tib": 1 << 40,
}

// parseBytes parses a size such as 2GiB, 512Mi, 1.5G or 1048576 into
// bytes.
func parseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := t, ""
	if i >= 0 {
		num, unit = t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	}
	mult, ok := byteUnits[unit]
	if !ok {
		return 0, fmt.Errorf("%q: unknown unit %q (want B, kB, MB, GB, TB, KiB, MiB, GiB or TiB)", s, t[i:])
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || num == "" {
		return 0, fmt.Errorf("%q: want a size such as 2GiB, 512MiB or 1073741824", s)
	}
	b := v * mult
	if b > math.MaxInt64 {
		return 0, fmt.Errorf("%q: too large", s)
	}
	return int64(math.Round(b)), nil
}
