package device

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/worldfoundry/wfgen/runtime/engine"
)

// EnvBatchSize is the global batch size override. The scoped form
// EnvBatchSize + "_" + SCOPE (see ScopeEnv) overrides it for one scope.
const EnvBatchSize = "WORLDFOUNDRY_BATCH_SIZE"

const gib = 1 << 30

// Memory bands of the automatic batch size, in bytes of free memory.
const (
	// ReferenceFree is the free memory a default batch size is meant for.
	ReferenceFree = 24 * gib
	// smallBelow is where conservative down-scaling starts: a 24 GiB card
	// never reports all 24 GiB free.
	smallBelow = 22 * gib
	// largeFrom is where scaling up starts: the 80 GB class (an 80 GB card
	// reports about 79 GiB total, less free).
	largeFrom = 70 * gib
	// maxScale caps the scale-up factor.
	maxScale = 8
)

// memInfoPath is where the CPU's available memory is read (a var for tests).
var memInfoPath = "/proc/meminfo"

// Source says where a batch size came from.
type Source string

// Sources of a BatchSize choice.
const (
	FromScopedEnv Source = "scoped env"
	FromGlobalEnv Source = "global env"
	FromMemory    Source = "free memory"
	FromDefault   Source = "default"
)

// BatchSize is a chosen batch size and why it was chosen.
type BatchSize struct {
	// Size is the batch size, at least 1.
	Size int
	// Source says which rule chose it.
	Source Source
	// Detail explains the choice for a log line, e.g.
	// "cuda:0 has 78.5 GiB free: 3 × default 16".
	Detail string
}

// ScopeEnv returns the variable that overrides the batch size of one scope:
// WORLDFOUNDRY_BATCH_SIZE_ followed by the scope upper-cased, with every
// character other than A-Z and 0-9 replaced by '_' ("text-encoder" →
// WORLDFOUNDRY_BATCH_SIZE_TEXT_ENCODER). An empty scope has no variable ("").
func ScopeEnv(scope string) string {
	if scope == "" {
		return ""
	}
	var b strings.Builder
	b.WriteString(EnvBatchSize + "_")
	for _, r := range strings.ToUpper(scope) {
		if (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// ChooseBatchSize picks the inference batch size for one scope (for example
// a task or a sub-model such as "text-encoder") on a device (the seed's
// memory-based batch size). The first rule that applies wins:
//
//  1. the scoped variable ScopeEnv(scope), when set and non-empty;
//  2. the global variable WORLDFOUNDRY_BATCH_SIZE, when set and non-empty;
//  3. on a CUDA device, ScaleBatchSize of def for the device's free memory;
//  4. on the CPU, ScaleBatchSize for MemAvailable from /proc/meminfo, never
//     above def (CPU throughput gains little from bigger batches, and host
//     memory is shared with everything else), or def when /proc/meminfo
//     cannot be read (not Linux);
//  5. on any other device, def.
//
// A variable that is set but is not a positive integer is an error naming
// it, never silently ignored. def must be at least 1.
func ChooseBatchSize(eng engine.Engine, device, scope string, def int) (BatchSize, error) {
	if def < 1 {
		return BatchSize{}, fmt.Errorf("batch size: default %d is not positive", def)
	}
	for _, e := range []struct {
		name string
		src  Source
	}{{ScopeEnv(scope), FromScopedEnv}, {EnvBatchSize, FromGlobalEnv}} {
		if e.name == "" {
			continue
		}
		v, ok := os.LookupEnv(e.name)
		if !ok || strings.TrimSpace(v) == "" {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 {
			return BatchSize{}, fmt.Errorf("batch size: %s=%q is not a positive integer", e.name, v)
		}
		return BatchSize{Size: n, Source: e.src, Detail: fmt.Sprintf("%s=%d", e.name, n)}, nil
	}

	d, err := Parse(device)
	if err != nil {
		return BatchSize{}, err
	}
	switch d.Type {
	case CUDA:
		idx, err := cudaIndex(eng, d)
		if err != nil {
			return BatchSize{}, fmt.Errorf("batch size: %w", err)
		}
		info, err := cudaDevice(eng, idx)
		if err != nil {
			return BatchSize{}, fmt.Errorf("batch size: cuda:%d: %w", idx, err)
		}
		n := ScaleBatchSize(def, info.FreeBytes)
		return BatchSize{Size: n, Source: FromMemory,
			Detail: fmt.Sprintf("cuda:%d has %.1f GiB free: %d for default %d", idx, float64(info.FreeBytes)/gib, n, def)}, nil
	case CPU:
		avail, err := readMemAvailable(memInfoPath)
		if err != nil {
			return BatchSize{Size: def, Source: FromDefault, Detail: fmt.Sprintf("cpu: default %d (%v)", def, err)}, nil
		}
		n := min(def, ScaleBatchSize(def, avail))
		return BatchSize{Size: n, Source: FromMemory,
			Detail: fmt.Sprintf("cpu has %.1f GiB available: %d for default %d", float64(avail)/gib, n, def)}, nil
	default:
		return BatchSize{Size: def, Source: FromDefault, Detail: fmt.Sprintf("%s: default %d", d, def)}, nil
	}
}

// ScaleBatchSize scales def, the right batch size for about 24 GiB of free
// memory, to free bytes:
//
//   - below 22 GiB: def × free / 32 GiB, rounded down, at least 1 — linear
//     with a 25% margin, so smaller devices start conservatively (16 GiB →
//     half of def, 8 GiB → a quarter);
//   - 22 GiB up to 70 GiB: def (the 24 GiB class up to 48 GiB cards);
//   - 70 GiB and more (the 80 GB class and larger): def × ⌊free / 24 GiB⌋,
//     at most 8 × def (78 GiB → 3 ×, 141 GiB → 5 ×).
//
// A def below 1 counts as 1; a result that would overflow int is def.
func ScaleBatchSize(def int, free uint64) int {
	def = max(def, 1)
	switch {
	case free < smallBelow:
		// def*free can overflow for absurd inputs; scale in float.
		n := int(float64(def) * float64(free) / float64(32*gib))
		return max(1, n)
	case free < largeFrom:
		return def
	default:
		k := int(min(maxScale, free/ReferenceFree))
		if def > math.MaxInt/k {
			return def
		}
		return def * k
	}
}

func readMemAvailable(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return ParseMemAvailable(bytes.NewReader(b))
}

// ParseMemAvailable reads the MemAvailable line of /proc/meminfo content
// ("MemAvailable:   12345678 kB") and returns it in bytes. A missing line,
// a unit other than kB or a number that does not fit is an error.
func ParseMemAvailable(r io.Reader) (uint64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("meminfo: malformed MemAvailable line %q", sc.Text())
		}
		kb, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil || kb > (1<<64-1)/1024 {
			return 0, fmt.Errorf("meminfo: MemAvailable %q is not a size in kB", f[0])
		}
		return kb * 1024, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("meminfo: %w", err)
	}
	return 0, fmt.Errorf("meminfo: no MemAvailable line")
}
