package torch

import (
	"path/filepath"
	"strings"
	"testing"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestResolveCompileDefaults(t *testing.T) {
	c, err := resolveCompile(CompileOptions{}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.enabled || c.strict || c.fullgraph || c.dynamic || c.backend != "inductor" || c.level != levelFreezeOptimize || c.mode != "default" || c.unsupported != "" {
		t.Errorf("defaults = %+v", c)
	}
	if c.cacheDir != "" && !strings.HasSuffix(c.cacheDir, filepath.Join("wfgen", "torch-compile")) {
		t.Errorf("default cache dir = %q", c.cacheDir)
	}
}

func TestResolveCompileEnvironment(t *testing.T) {
	vars := map[string]string{
		EnvCompile: "1", EnvCompileBackend: "AOT_EAGER", EnvCompileMode: "reduce-overhead",
		EnvCompileFullgraph: "true", EnvCompileDynamic: "yes", EnvCompileStrict: "on", EnvCompileCacheDir: "/tmp/x",
	}
	c, err := resolveCompile(CompileOptions{}, env(vars))
	if err != nil {
		t.Fatal(err)
	}
	if !c.enabled || !c.strict || !c.fullgraph || !c.dynamic || c.backend != "aot_eager" || c.level != levelFreeze ||
		c.mode != "reduce-overhead" || c.cacheDir != "/tmp/x" || c.unsupported != "" {
		t.Errorf("from environment = %+v", c)
	}
	// Explicit options win over the environment.
	off := false
	c, err = resolveCompile(CompileOptions{Enabled: &off, Strict: &off, Backend: "inductor", Mode: "default", CacheDir: "off"}, env(vars))
	if err != nil {
		t.Fatal(err)
	}
	if c.enabled || c.strict || c.backend != "inductor" || c.level != levelFreezeOptimize || c.mode != "default" || c.cacheDir != "" {
		t.Errorf("explicit = %+v", c)
	}
}

func TestResolveCompileErrors(t *testing.T) {
	for _, name := range []string{EnvCompile, EnvCompileFullgraph, EnvCompileDynamic, EnvCompileStrict} {
		_, err := resolveCompile(CompileOptions{}, env(map[string]string{name: "sometimes"}))
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=sometimes: error = %v", name, err)
		}
	}
	c, err := resolveCompile(CompileOptions{Backend: "tvm"}, env(nil))
	if err != nil || !strings.Contains(c.unsupported, `backend "tvm"`) {
		t.Errorf("unknown backend: %+v, %v", c, err)
	}
	c, err = resolveCompile(CompileOptions{Mode: "turbo"}, env(nil))
	if err != nil || !strings.Contains(c.unsupported, `mode "turbo"`) {
		t.Errorf("unknown mode: %+v, %v", c, err)
	}
}

// TestCompileIsAFreeze: compiling is a TorchScript freeze, with libtorch's
// frozen-graph fusions for the default backends — never torch.compile. Every
// backend maps to one of the two freeze levels, and mode, fullgraph and
// dynamic, which torch.compile would honour, are validated and recorded
// (the cache key has them) but do not change what runs: the level is the
// backend's whatever they are (docs/differences.md).
func TestCompileIsAFreeze(t *testing.T) {
	for backend, level := range compileBackends {
		if level != levelFreeze && level != levelFreezeOptimize {
			t.Errorf("backend %s runs level %d, which is not a freeze", backend, level)
		}
	}
	on, off := true, false
	for _, backend := range []string{"inductor", "eager"} {
		base, err := resolveCompile(CompileOptions{Backend: backend}, env(nil))
		if err != nil {
			t.Fatal(err)
		}
		for _, mode := range compileModes {
			for _, fg := range []*bool{&on, &off} {
				for _, dyn := range []*bool{&on, &off} {
					c, err := resolveCompile(CompileOptions{Backend: backend, Mode: mode, Fullgraph: fg, Dynamic: dyn}, env(nil))
					if err != nil || c.unsupported != "" {
						t.Fatalf("%s %s: %v %s", backend, mode, err, c.unsupported)
					}
					if c.level != base.level || c.mode != mode || c.fullgraph != *fg || c.dynamic != *dyn {
						t.Errorf("%s mode %s fullgraph %v dynamic %v: level %d (want %d), recorded %s %v %v",
							backend, mode, *fg, *dyn, c.level, base.level, c.mode, c.fullgraph, c.dynamic)
					}
				}
			}
		}
	}
}
