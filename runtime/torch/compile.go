//go:build cgo

package torch

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/worldfoundry/wfgen/runtime/torch/internal/shim"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/spec"
)

// Compile implements engine.Compiler: CompileModule with the spec's fields
// as its options (unset ones fall back to the WORLDFOUNDRY_TORCH_COMPILE*
// variables).
func (e *Engine) Compile(m engine.Module, c spec.CompileSpec) (engine.Module, error) {
	return CompileModule(m, CompileOptions{Enabled: c.Enabled, Backend: c.Backend, Mode: c.Mode, Strict: c.Strict})
}

// CompileModule is the seed's compile_module_if_enabled with its persistent
// cache. When enabled (CompileOptions.Enabled, else WORLDFOUNDRY_TORCH_COMPILE)
// it freezes m — parameters become graph constants, after the device/dtype
// move done at load, and batch norms fold into convolutions — and, for the
// default backend, fuses as libtorch's optimize_for_inference does but
// without its MKLDNN layout conversion, which gives wrong results for some
// models on libtorch 1.13 and crashes on 2.6 (backends "optimize_for_inference"
// and "mkldnn", which would run it, are refused; CompileOptions.Backend lists
// the backends).
//
// An AOTInductor package (*AOTIModule) is returned as it is: it was
// compiled ahead of time.
//
// It returns m itself when compilation is disabled — whatever m is, even a
// module of another engine, and without reading the other options, as the
// seed's compile_module_if_enabled(enabled=False) — when m is already
// compiled, and — non-strict only — when the backend or mode is unsupported
// or compiling fails (with a slog warning). In strict mode those are errors.
// Otherwise it returns a new module that the caller owns alongside m (close
// m when it is no longer needed: the compiled module holds its own copy of
// the weights).
//
// Compiled modules are cached on disk, keyed by the module file's bytes, the
// options, the libtorch version, the device and the dtype, so the next
// process loads the compiled form instead of compiling again. Cache problems
// are logged and never fail the compile.
func CompileModule(m engine.Module, opts CompileOptions) (engine.Module, error) {
	if on, err := boolVar(opts.Enabled, EnvCompile, os.Getenv); err != nil || !on {
		if err != nil {
			return nil, fmt.Errorf("torch: compile: %w", err)
		}
		return m, nil
	}
	if _, ok := m.(*AOTIModule); ok {
		return m, nil // compiled ahead of time
	}
	tm, ok := m.(*Module)
	if !ok {
		return nil, fmt.Errorf("torch: compile: module %T was not loaded by the libtorch engine", m)
	}
	cfg, err := resolveCompile(opts, os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("torch: compile %s: %w", tm.path, err)
	}
	if !cfg.enabled || tm.Compiled() {
		return m, nil
	}
	label := cfg.label
	if label == "" {
		label = filepath.Base(tm.path)
	}
	fail := func(err error) (engine.Module, error) {
		if cfg.strict {
			return nil, err
		}
		slog.Warn("torch compile failed; using the module uncompiled", "label", label, "path", tm.path, "err", err)
		return m, nil
	}
	if cfg.unsupported != "" {
		return fail(fmt.Errorf("torch: compile %s: %s", tm.path, cfg.unsupported))
	}
	key, keyErr := compileKey(tm, cfg)
	cachePath := ""
	if cfg.cacheDir != "" && keyErr == nil {
		cachePath = filepath.Join(cfg.cacheDir, key+".pt")
		if c, err := tm.eng.load(cachePath, engine.LoadOptions{Device: tm.Device(), DType: tm.dtype}); err == nil {
			if c.Compiled() {
				slog.Debug("torch compile cache hit", "label", label, "path", tm.path, "cache", cachePath)
				c.path = tm.path
				return c, nil
			}
			c.Close()
		} else if !errors.Is(err, os.ErrNotExist) {
			slog.Warn("torch compile cache entry unusable; compiling again", "label", label, "cache", cachePath, "err", err)
		}
	} else if keyErr != nil && cfg.cacheDir != "" {
		slog.Warn("torch compile cache skipped", "label", label, "path", tm.path, "err", keyErr)
	}
	c, err := tm.compile(cfg.level)
	if err != nil {
		return fail(err)
	}
	if cachePath != "" {
		if err := storeCompiled(c, cachePath); err != nil {
			slog.Warn("torch compile cache not written", "label", label, "cache", cachePath, "err", err)
		}
	}
	return c, nil
}

// compile freezes (and, by level, optimises) m into a new module.
func (m *Module) compile(level int) (*Module, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return nil, fmt.Errorf("torch: compile %s: %w", m.path, engine.ErrClosed)
	}
	nh, res := shim.Compile(m.h, level, make([]byte, 16<<10))
	if res.Status != statusOK {
		return nil, newError("compile", m.path, "", res.Status, string(res.Payload))
	}
	info, err := decodeInfo(res.Payload)
	if err != nil {
		shim.Close(nh)
		return nil, fmt.Errorf("torch: compile %s: %w", m.path, err)
	}
	return newModule(m.eng, nh, info, m.path, m.dtype, m.stat), nil
}

// compileKey hashes the module file (which must not have changed since
// load) with everything that changes the compiled result.
func compileKey(m *Module, c compileConfig) (string, error) {
	f, err := os.Open(m.path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	if m.stat == nil || st.Size() != m.stat.Size() || !st.ModTime().Equal(m.stat.ModTime()) {
		return "", fmt.Errorf("%s changed since it was loaded", m.path)
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	fileSum := h.Sum(nil)
	k := sha256.New()
	fmt.Fprintf(k, "wfgen-torch-compile-v1\nfile=%x\nbackend=%s\nlevel=%d\nmode=%s\nfullgraph=%t\ndynamic=%t\n",
		fileSum, c.backend, c.level, c.mode, c.fullgraph, c.dynamic)
	names := make([]string, 0, len(c.options))
	for n := range c.options {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(k, "option=%s=%s\n", strconv.Quote(n), strconv.Quote(c.options[n]))
	}
	fmt.Fprintf(k, "libtorch=%s\ndevice=%s\ndtype=%s\n", shim.Version(), m.Device(), m.dtype)
	return hex.EncodeToString(k.Sum(nil)), nil
}

// storeCompiled writes c to path atomically (temp file + rename).
func storeCompiled(c *Module, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	name := tmp.Name()
	tmp.Close()
	if err := c.save(name); err != nil {
		os.Remove(name)
		return err
	}
	if err := os.Rename(name, path); err != nil {
		os.Remove(name)
		return err
	}
	return nil
}
