package torch

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/worldfoundry/wfgen/runtime/infra"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// ErrUnavailable is returned by this package's helpers in a build without
// cgo; it wraps engine.ErrNoEngine.
var ErrUnavailable = fmt.Errorf("torch: package built without cgo: %w", engine.ErrNoEngine)

// ModuleSource describes a TorchScript module built from source by
// BuildModule.
type ModuleSource struct {
	// Source is the TorchScript source of the module's methods, e.g.
	// "def forward(self, x: Tensor) -> Tensor:\n    return x * self.w\n".
	Source string
	// Parameters are registered as parameters (self.NAME) before Source is
	// compiled.
	Parameters map[string]*tensor.Tensor
	// Buffers are registered as buffers (self.NAME); unlike parameters they
	// may be integer or bool.
	Buffers map[string]*tensor.Tensor
}

// Variables read by CompileModule when the matching CompileOptions field is
// unset (docs/engine.md has their meaning under libtorch).
const (
	EnvCompile          = "WORLDFOUNDRY_TORCH_COMPILE"
	EnvCompileBackend   = "WORLDFOUNDRY_TORCH_COMPILE_BACKEND"
	EnvCompileMode      = "WORLDFOUNDRY_TORCH_COMPILE_MODE"
	EnvCompileFullgraph = "WORLDFOUNDRY_TORCH_COMPILE_FULLGRAPH"
	EnvCompileDynamic   = "WORLDFOUNDRY_TORCH_COMPILE_DYNAMIC"
	EnvCompileStrict    = "WORLDFOUNDRY_TORCH_COMPILE_STRICT"
	// EnvCompileCacheDir is the compile cache folder; "off" disables it.
	EnvCompileCacheDir = "WORLDFOUNDRY_TORCH_COMPILE_CACHE_DIR"
)

// CompileOptions are the seed's compile_module_if_enabled arguments. A nil or
// empty field falls back to its WORLDFOUNDRY_TORCH_COMPILE* variable, then
// to the default.
type CompileOptions struct {
	// Enabled turns compilation on; default off (compilation is opt-in).
	Enabled *bool
	// Label names the module in log lines.
	Label string
	// Backend is the torch.compile backend name. "inductor" (default),
	// "cudagraphs" and "optimize" freeze and fuse (libtorch's
	// optimize_for_inference without its MKLDNN layout conversion);
	// "eager", "aot_eager" and "freeze" only freeze. "optimize_for_inference"
	// and "mkldnn" (libtorch's full pass) are refused: see refusedBackends.
	Backend string
	// Mode is a torch.compile mode (default, reduce-overhead, max-autotune,
	// max-autotune-no-cudagraphs): validated and part of the cache key;
	// libtorch 1.13 has no mode switch.
	Mode string
	// Fullgraph is recorded in the cache key; TorchScript graphs are always
	// whole graphs. Default false.
	Fullgraph *bool
	// Dynamic is recorded in the cache key; TorchScript keeps dynamic
	// shapes. Default false.
	Dynamic *bool
	// Strict makes a failed or unsupported compile an error; otherwise the
	// module is returned uncompiled with a logged warning. Default false.
	Strict *bool
	// Options are extra backend options; recorded in the cache key.
	Options map[string]string
	// CacheDir is the on-disk compile cache; "off" disables it. Default
	// $WORLDFOUNDRY_TORCH_COMPILE_CACHE_DIR, else the user cache directory's
	// wfgen/torch-compile.
	CacheDir string
}

// Compile levels (the shim's wf_compile).
const (
	levelFreeze         = 0 // freeze
	levelFreezeOptimize = 1 // freeze + conv-add-relu fusion + frozen linear transpose
)

var compileBackends = map[string]int{
	"inductor":   levelFreezeOptimize,
	"cudagraphs": levelFreezeOptimize,
	"optimize":   levelFreezeOptimize,
	"eager":      levelFreeze,
	"aot_eager":  levelFreeze,
	"freeze":     levelFreeze,
}

// refusedBackends are backends that name libtorch's full
// optimize_for_inference, whose MKLDNN layout conversion is not safe to
// offer: on torchvision's mobilenet_v3_small it gave a relative error of
// 0.26 under libtorch 1.13 (Python's torch.jit.optimize_for_inference the
// same) and killed the process with SIGFPE inside oneDNN under 2.6 on the
// project's CI machines (KVM guests).
var refusedBackends = map[string]string{
	"optimize_for_inference": "libtorch's MKLDNN conversion gives wrong results (1.13) or crashes (2.6) on common models; the default backend runs the same pass without it",
	"mkldnn":                 "libtorch's MKLDNN conversion gives wrong results (1.13) or crashes (2.6) on common models; the default backend runs the same pass without it",
}

var compileModes = []string{"default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"}

// compileConfig is a CompileOptions with every field decided.
type compileConfig struct {
	enabled   bool
	label     string
	backend   string
	level     int
	mode      string
	fullgraph bool
	dynamic   bool
	strict    bool
	options   map[string]string
	cacheDir  string // "" = no cache
	// unsupported is set (and everything else still decided) when the
	// backend or mode is not one libtorch can honour.
	unsupported string
}

func boolVar(explicit *bool, name string, getenv func(string) string) (bool, error) {
	if explicit != nil {
		return *explicit, nil
	}
	if s := getenv(name); strings.TrimSpace(s) != "" {
		return infra.ParseBool(name, s)
	}
	return false, nil
}

// resolveCompile decides every option; a malformed variable is an error.
func resolveCompile(o CompileOptions, getenv func(string) string) (compileConfig, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	c := compileConfig{label: o.Label, options: o.Options}
	var err error
	if c.enabled, err = boolVar(o.Enabled, EnvCompile, getenv); err != nil {
		return c, err
	}
	if c.strict, err = boolVar(o.Strict, EnvCompileStrict, getenv); err != nil {
		return c, err
	}
	if c.fullgraph, err = boolVar(o.Fullgraph, EnvCompileFullgraph, getenv); err != nil {
		return c, err
	}
	if c.dynamic, err = boolVar(o.Dynamic, EnvCompileDynamic, getenv); err != nil {
		return c, err
	}
	c.backend = strings.ToLower(strings.TrimSpace(o.Backend))
	if c.backend == "" {
		c.backend = strings.ToLower(strings.TrimSpace(getenv(EnvCompileBackend)))
	}
	if c.backend == "" {
		c.backend = "inductor"
	}
	level, ok := compileBackends[c.backend]
	if why, refused := refusedBackends[c.backend]; refused {
		c.unsupported = fmt.Sprintf("backend %q is refused: %s", c.backend, why)
	} else if !ok {
		names := make([]string, 0, len(compileBackends))
		for n := range compileBackends {
			names = append(names, n)
		}
		sort.Strings(names)
		c.unsupported = fmt.Sprintf("backend %q is not supported by libtorch (supported: %s)", c.backend, strings.Join(names, ", "))
	}
	c.level = level
	c.mode = strings.ToLower(strings.TrimSpace(o.Mode))
	if c.mode == "" {
		c.mode = strings.ToLower(strings.TrimSpace(getenv(EnvCompileMode)))
	}
	if c.mode == "" {
		c.mode = "default"
	}
	if !containsString(compileModes, c.mode) && c.unsupported == "" {
		c.unsupported = fmt.Sprintf("mode %q is not a torch.compile mode (%s)", c.mode, strings.Join(compileModes, ", "))
	}
	c.cacheDir = cacheDir(o.CacheDir, getenv)
	return c, nil
}

// cacheDir resolves the compile cache folder: dir, else
// $WORLDFOUNDRY_TORCH_COMPILE_CACHE_DIR, else the user cache directory's
// wfgen/torch-compile; "" when it is "off" (or there is no user cache
// directory).
func cacheDir(dir string, getenv func(string) string) string {
	if dir == "" {
		dir = strings.TrimSpace(getenv(EnvCompileCacheDir))
	}
	switch {
	case strings.EqualFold(dir, "off"):
		dir = ""
	case dir == "":
		if ucd, err := os.UserCacheDir(); err == nil {
			dir = filepath.Join(ucd, "wfgen", "torch-compile")
		}
	}
	return dir
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
