package client

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/worldfoundry/wfgen/runtime/artifactio"
	"github.com/worldfoundry/wfgen/runtime/batch"
	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/spec"
	wftensor "github.com/worldfoundry/wfgen/runtime/tensor"
)

// The sizes a batch may be sent at in invariant mode.
//
// An invariant batch must give each item the bits the task's max batch size
// gives it. Which other sizes do is a property of the model's kernels on
// this machine and of the item's shape (docs/batching.md has the
// measurements: a batch of one usually takes another path; on some CPUs so
// do larger sizes; a text encoder's sequences of one token behave unlike
// those of sixteen), so the client measures it, once per loaded model, task
// and item shape, before the first invariant batch of that shape: M probe
// items (M the max batch size) shaped like the batch's first item, their
// stacked inputs random, run as one batch of M, then the first s of them as
// a batch of s for every candidate size s; a size is equivalent when each
// of its rows has the bits of the same row of the batch of M. Each size
// runs twice and the second call counts (a TorchScript module's first call
// at a shape profiles it). The result is kept in the engine's cache folder
// (engine.CacheDirer, the compile cache) under a key of the checkpoint, the
// method, the item's shapes and other inputs, the engine, the device and
// dtype, the CPU and the thread count, so a machine measures a model once
// per shape. The rows compared are every tensor the method returns
// (withUndeclared); when none is floating point the sizes are not measured
// and batches go at the max (errBlindOutputs).

// equivalence is one task's measured equivalent sizes, per item shape,
// each measured at most once per loaded model.
type equivalence struct {
	mu     sync.Mutex
	shapes map[string]*measured // by the probe's key (equivalenceProbe)
}

// measured is one shape's equivalent sizes (nil: the max alone).
type measured struct {
	once  sync.Once
	sizes []int
}

// maxMeasuredShapes bounds the item shapes measured per task and loaded
// model: batches of further shapes are padded to the max (a text model
// fed every length from 1 to 512 would otherwise measure each).
const maxMeasuredShapes = 16

// measuringKey marks the context of a measurement's own batches, which run
// at explicit sizes and must not wait for the measurement.
type measuringKey struct{}

// equivalentSizes returns the option that gives cfg (a task's invariant
// batch config) the sizes equivalent to its max batch size for items like
// item (one item's inputs by field id), measuring them first when this
// loaded model has not; nil when there is nothing to add: cfg is not
// invariant, has another max than the task's, or the sizes cannot be
// measured (then every batch goes at the max, as before).
func (c *Client) equivalentSizes(ctx context.Context, ti int, task *spec.InferenceTaskProfile, l *loaded, cfg batch.Config, item map[string]any) batch.Option {
	lt := &l.tasks[ti]
	if !cfg.Invariant || lt.equiv == nil || task.Batching == nil || cfg.MaxBatchSize != lt.batchCfg.MaxBatchSize || ctx.Value(measuringKey{}) != nil {
		return nil
	}
	key, err := probeKey(task, item)
	if err != nil {
		return nil
	}
	e := lt.equiv
	e.mu.Lock()
	m := e.shapes[key]
	if m == nil {
		if len(e.shapes) >= maxMeasuredShapes {
			e.mu.Unlock()
			return nil
		}
		if e.shapes == nil {
			e.shapes = map[string]*measured{}
		}
		m = &measured{}
		e.shapes[key] = m
	}
	e.mu.Unlock()
	m.once.Do(func() { m.sizes = c.measureEquivalence(ti, task, l, cfg, item, key) })
	if len(m.sizes) == 0 {
		return nil
	}
	return batch.WithEquivalentSizes(cfg.MaxBatchSize, m.sizes...)
}

// equivalenceRecord is what the cache holds for one measurement.
type equivalenceRecord struct {
	Sizes []int  `json:"sizes"`
	Key   string `json:"key"` // what was hashed, for a reader
}

// measureEquivalence reads the task's equivalent sizes for items like item
// (whose probe key is shapes) from the cache, or measures and stores them.
// A failure is logged and gives none.
func (c *Client) measureEquivalence(ti int, task *spec.InferenceTaskProfile, l *loaded, cfg batch.Config, item map[string]any, shapes string) []int {
	log := slog.With("model", c.where(task.TaskID), "max_batch_size", cfg.MaxBatchSize, "item", shapes)
	candidates := equivalenceCandidates(cfg)
	keyText := equivalenceKey(l, task, cfg.MaxBatchSize, candidates, shapes)
	sum := sha256.Sum256([]byte(keyText))
	path := ""
	if d, ok := l.engine.(engine.CacheDirer); ok {
		if dir := d.CacheDir(); dir != "" {
			path = filepath.Join(dir, "batch-sizes", hex.EncodeToString(sum[:16])+".json")
		}
	}
	if path != "" {
		if b, err := os.ReadFile(path); err == nil {
			var r equivalenceRecord
			if json.Unmarshal(b, &r) == nil && r.Key == keyText {
				log.Debug("equivalent batch sizes from the cache", "sizes", r.Sizes, "cache", path)
				return r.Sizes
			}
		}
	}
	sizes, err := c.probeSizes(ti, task, item, cfg.MaxBatchSize, candidates)
	switch {
	case errors.Is(err, errBlindOutputs):
		log.Info("invariant batches go at the max batch size", "why", err)
	case err != nil:
		log.Warn("invariant batches go at the max batch size: measuring equivalent sizes failed", "err", err)
		return nil
	default:
		log.Info("measured the batch sizes that give the max batch size's bits", "sizes", sizes)
	}
	if path != "" {
		b, _ := json.MarshalIndent(equivalenceRecord{Sizes: sizes, Key: keyText}, "", "  ")
		err := os.MkdirAll(filepath.Dir(path), 0o755)
		if err == nil {
			err = artifactio.WriteFileAtomic(path, func(w io.Writer) error { _, err := w.Write(b); return err })
		}
		if err != nil {
			log.Warn("equivalent batch sizes not cached", "cache", path, "err", err)
		}
	}
	return sizes
}

// equivalenceCandidates are the sizes worth measuring: the pad sizes, or
// every size from the min to the max.
func equivalenceCandidates(cfg batch.Config) []int {
	var out []int
	for n := max(1, cfg.MinBatchSize); n < cfg.MaxBatchSize; n++ {
		if len(cfg.PadSizes) == 0 || slices.Contains(cfg.PadSizes, n) {
			out = append(out, n)
		}
	}
	return out
}

// probeSizes runs the probe at max, then at each candidate size, and
// returns the candidates whose rows have the max's bits, and the max; the
// max alone and errBlindOutputs when no output is floating point.
// Integer inputs take values below 1,000, else below 100, 10 or 2 — the
// first range the model accepts (a token table may be small).
func (c *Client) probeSizes(ti int, task *spec.InferenceTaskProfile, item map[string]any, maxSize int, candidates []int) ([]int, error) {
	ctx := context.WithValue(context.Background(), measuringKey{}, true)
	var probe []map[string]any
	floats := false // whether an output is floating point
	run := func(n int) ([][]byte, error) {
		var rows [][]byte
		for range 2 {
			rows = rows[:0]
			err := c.callBatch(ctx, ti, task, Kwargs(task, probe[:n]...), CallOptions{}, func(_ int, out map[string]any) error {
				rows = append(rows, outputBits(out))
				floats = floats || hasFloats(out)
				return nil
			}, batch.WithMaxBatchSize(n), batch.WithPadSizes(n), batch.WithLanes(1))
			if err != nil {
				return nil, fmt.Errorf("a batch of %d: %w", n, err)
			}
		}
		return rows, nil
	}
	var ref [][]byte
	var err error
	for _, ints := range []int{1000, 100, 10, 2} {
		if probe, err = equivalenceProbe(task, item, maxSize, ints); err != nil {
			return nil, err
		}
		if ref, err = run(maxSize); err == nil {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	again, err := run(maxSize)
	if err != nil {
		return nil, err
	}
	if !slices.EqualFunc(ref, again, bytes.Equal) {
		return nil, fmt.Errorf("two batches of %d gave different bits: the model is not deterministic", maxSize)
	}
	if !floats {
		return []int{maxSize}, errBlindOutputs
	}
	var sizes []int
	for _, n := range candidates {
		rows, err := run(n)
		if err != nil {
			return nil, err
		}
		if slices.EqualFunc(rows, ref[:n], bytes.Equal) {
			sizes = append(sizes, n)
		}
	}
	return append(sizes, maxSize), nil
}

// errBlindOutputs refuses a measurement whose outputs are all integers,
// bytes or booleans (chosen classes, token ids, colours): kernels of two
// batch sizes that differ in the last bits give such outputs the same
// bits except where two scores nearly tie, which random probe items rarely
// hit and a rollout that feeds its outputs back eventually does (the world
// model: a batch of one takes libtorch's native convolution, its scores
// differ from a batch of 2 to 8 by up to 7e-5 on every probe, its frames
// on none, and a player of 6,019 chunks played alone left the frames it
// got in company at chunk 4,777). Such a task's invariant batches go at
// the max batch size; a floating-point tensor the method returns beside
// them (the scores they were chosen from, under a key of its own: see
// withUndeclared) lets the sizes be measured.
var errBlindOutputs = errors.New("the method's outputs are all integers, bytes or booleans, which hide the last-bit differences between batch sizes (return a floating-point tensor beside them under a key of its own, e.g. the scores they were chosen from: the measurement compares every tensor the method returns)")

// hasFloats reports whether an output of out is a floating-point tensor.
func hasFloats(out map[string]any) bool {
	for _, v := range out {
		if t, ok := v.(*wftensor.Tensor); ok && t.DType.IsFloating() {
			return true
		}
	}
	return false
}

// withUndeclared adds to out (a measurement's call's artifacts) the other
// tensors of raw, a returned dict, that have a row per item (n): the
// measurement compares every tensor the method returns, declared or not,
// so a method whose artifacts are integers can return the scores they were
// chosen from beside them for it to see.
func withUndeclared(out map[string]any, raw any, n int) map[string]any {
	m, ok := raw.(map[string]any)
	if !ok {
		return out
	}
	for k, v := range m {
		t, ok := v.(*wftensor.Tensor)
		if _, declared := out[k]; declared || !ok || len(t.Shape) == 0 || t.Shape[0] != int64(n) {
			continue
		}
		out[k] = t
	}
	return out
}

// outputBits is one item's outputs as bytes, in artifact order.
func outputBits(out map[string]any) []byte {
	ids := make([]string, 0, len(out))
	for k := range out {
		ids = append(ids, k)
	}
	slices.Sort(ids)
	var b []byte
	for _, k := range ids {
		if t, ok := out[k].(*wftensor.Tensor); ok {
			b = append(b, t.Data...)
		}
	}
	return b
}

// probeKey describes the items a measurement stands for: the stacked
// inputs' dtypes and shapes and the other inputs' values, of item (one
// item's inputs by field id). An error when no stacked input is a tensor
// of a dtype the probe can fill.
func probeKey(task *spec.InferenceTaskProfile, item map[string]any) (string, error) {
	var b strings.Builder
	filled := false
	for f := range task.Inputs {
		fs := &task.Inputs[f]
		v := item[fs.FieldID]
		if t, ok := v.(*wftensor.Tensor); ok && t != nil && fs.IsStacked() {
			fmt.Fprintf(&b, "%s=%s%v ", fs.FieldID, t.DType, t.Shape)
			filled = filled || fillRandom(nil, &wftensor.Tensor{DType: t.DType}, 0)
			continue
		}
		switch t, ok := v.(*wftensor.Tensor); {
		case ok && t != nil:
			sum := sha256.Sum256(t.Data)
			fmt.Fprintf(&b, "%s:%s%v:%x ", fs.FieldID, t.DType, t.Shape, sum[:8])
		case v != nil:
			fmt.Fprintf(&b, "%s:%T:%v ", fs.FieldID, v, v)
		}
	}
	if !filled {
		return "", fmt.Errorf("no stacked input of a dtype the probe can fill (%s)", strings.TrimSpace(b.String()))
	}
	return strings.TrimSpace(b.String()), nil
}

// equivalenceProbe makes n probe items like item (one item's inputs by
// field id): each stacked tensor input filled with seeded random values of
// its dtype and shape (floats in [-1, 1), integers in [0, ints), bytes 0 to
// 255, booleans), so that sizes taking other kernels show in the last
// bits — zeros would hide them —, the other inputs item's.
func equivalenceProbe(task *spec.InferenceTaskProfile, item map[string]any, n, ints int) ([]map[string]any, error) {
	rng := rand.New(rand.NewPCG(0x5eed, uint64(n)))
	items := make([]map[string]any, n)
	for i := range items {
		items[i] = maps.Clone(item)
	}
	for f := range task.Inputs {
		fs := &task.Inputs[f]
		t, ok := item[fs.FieldID].(*wftensor.Tensor)
		if !fs.IsStacked() || !ok || t == nil {
			continue
		}
		for i := range items {
			r := &wftensor.Tensor{DType: t.DType, Shape: slices.Clone(t.Shape), Data: make([]byte, len(t.Data))}
			if !fillRandom(rng, r, ints) {
				break
			}
			items[i][fs.FieldID] = r
		}
	}
	return items, nil
}

// fillRandom fills t with random values of its dtype, integers in [0,
// ints); false for a dtype it cannot fill (with rng nil, it only says).
func fillRandom(rng *rand.Rand, t *wftensor.Tensor, ints int) bool {
	d := t.Data
	if rng == nil {
		return slices.Contains([]wftensor.DType{wftensor.Float32, wftensor.Float16, wftensor.BFloat16, wftensor.Int64, wftensor.Int32, wftensor.Uint8, wftensor.Bool}, t.DType)
	}
	switch t.DType {
	case wftensor.Float32:
		for i := 0; i+4 <= len(d); i += 4 {
			binary.LittleEndian.PutUint32(d[i:], math.Float32bits(float32(rng.Float64()*2-1)))
		}
	case wftensor.Float16, wftensor.BFloat16:
		for i := 0; i+2 <= len(d); i += 2 {
			// Small values whose bits are valid in both: sign, an
			// exponent a little below one's, random fraction.
			bits := uint16(rng.IntN(1 << 7))
			if t.DType == wftensor.Float16 {
				bits = uint16(rng.IntN(1<<10)) | 14<<10
			} else {
				bits |= 126 << 7
			}
			if rng.IntN(2) == 1 {
				bits |= 1 << 15
			}
			binary.LittleEndian.PutUint16(d[i:], bits)
		}
	case wftensor.Int64:
		for i := 0; i+8 <= len(d); i += 8 {
			binary.LittleEndian.PutUint64(d[i:], uint64(rng.IntN(ints)))
		}
	case wftensor.Int32:
		for i := 0; i+4 <= len(d); i += 4 {
			binary.LittleEndian.PutUint32(d[i:], uint32(rng.IntN(ints)))
		}
	case wftensor.Uint8:
		for i := range d {
			d[i] = byte(rng.IntN(256))
		}
	case wftensor.Bool:
		for i := range d {
			d[i] = byte(rng.IntN(2))
		}
	default:
		return false
	}
	return true
}

// equivalenceKey is what a measurement depends on, as text: the module
// (file, size, time, format, device, dtype, compile), the method, the
// max and candidate sizes, the items' shapes and other inputs (probeKey),
// the engine, the CPU and the threads.
func equivalenceKey(l *loaded, task *spec.InferenceTaskProfile, maxSize int, candidates []int, shapes string) string {
	k := l.key
	return fmt.Sprintf("wfgen-batch-sizes-v2\nfile=%s\nsize=%d\nmtime=%d\nformat=%s\ndevice=%s\ndtype=%s\ncompile=%s\nmethod=%s\nmax=%d\ncandidates=%v\nprobe=%s\nengine=%s %s\ncpu=%s\nthreads=%s cpus=%d\n",
		k.path, k.size, k.mtime.UnixNano(), k.format, k.device, k.dtype, k.compile, task.MethodName(), maxSize, candidates, shapes,
		l.engine.Name(), l.engine.Version(), cpuModel(), os.Getenv("WORLDFOUNDRY_TORCH_THREADS"), runtime.NumCPU())
}

// cpuModel names the CPU and its features (Linux's /proc/cpuinfo), "" where
// unknown.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	var name, flags string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() && (name == "" || flags == "") {
		k, v, ok := strings.Cut(sc.Text(), ":")
		switch k = strings.TrimSpace(k); {
		case !ok:
		case k == "model name" && name == "":
			name = strings.TrimSpace(v)
		case (k == "flags" || k == "Features") && flags == "":
			flags = strings.TrimSpace(v)
		}
	}
	sum := sha256.Sum256([]byte(flags))
	return fmt.Sprintf("%s %s flags:%x", runtime.GOARCH, name, sum[:8])
}
