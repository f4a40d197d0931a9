package infra

import (
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
)

// fakeEngine records flags like libtorch 1.13 does (cuBLAS TF32 derived from
// the precision).
type fakeEngine struct {
	mu       sync.Mutex
	flags    Flags
	sets     int
	failSet  bool
	failRead bool
}

func (f *fakeEngine) GlobalFlags() (Flags, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failRead {
		return Flags{}, errors.New("read failed")
	}
	return f.flags, nil
}

func (f *fakeEngine) SetGlobalFlags(fl Flags) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failSet {
		return errors.New("write failed")
	}
	fl.AllowTF32CuBLAS = fl.MatmulPrecision != PrecisionHighest
	f.flags = fl
	f.sets++
	return nil
}

// libtorch 1.13's defaults.
func torchDefaults() Flags {
	return Flags{MatmulPrecision: PrecisionHighest, AllowTF32CuDNN: true, FlashSDP: true, MathSDP: true}
}

func vars(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestDefaultsWithoutEngine(t *testing.T) {
	p := NewPolicy(nil, vars(nil))
	if st := p.State(); st.Installed || st.AttentionBackend != "auto" || st.MatmulPrecision != "high" || !st.TF32Enabled {
		t.Errorf("initial state = %+v, want the seed's defaults", st)
	}
	st, err := p.Install(Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := State{Installed: true, PatchSDPA: true, AttentionBackend: "auto", MatmulPrecision: "high", TF32Enabled: true}
	if st != want || p.State() != want {
		t.Errorf("Install() = %+v, want %+v (recorded only)", st, want)
	}
}

func TestInstallAppliesAndUninstallRestores(t *testing.T) {
	e := &fakeEngine{flags: torchDefaults()}
	p := NewPolicy(e, vars(nil))
	st, err := p.Install(Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := Flags{MatmulPrecision: "high", AllowTF32CuBLAS: true, AllowTF32CuDNN: true, FlashSDP: true, MathSDP: true}
	if e.flags != want || !st.Applied || st.Flags != want {
		t.Errorf("flags after install = %+v (state %+v), want %+v", e.flags, st, want)
	}
	// Idempotent: a second install writes nothing.
	sets := e.sets
	if st2, err := p.Install(Options{MatmulPrecision: "medium"}); err != nil || st2 != st || e.sets != sets {
		t.Errorf("second Install = %+v, %v (sets %d→%d)", st2, err, sets, e.sets)
	}
	st, err = p.Uninstall()
	if err != nil {
		t.Fatal(err)
	}
	if e.flags != torchDefaults() || st.Installed {
		t.Errorf("after uninstall: flags %+v, state %+v", e.flags, st)
	}
	if _, err := p.Uninstall(); err != nil {
		t.Errorf("second Uninstall: %v", err)
	}
}

func TestEnvironmentAndExplicitOptions(t *testing.T) {
	env := map[string]string{
		EnvAttentionBackend: " Flash ", EnvMatmulPrecision: "MEDIUM", EnvPatchSDPA: "0", EnvDeterministic: "yes",
	}
	e := &fakeEngine{flags: torchDefaults()}
	p := NewPolicy(e, vars(env))
	st, err := p.Install(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if st.AttentionBackend != "flash" || st.MatmulPrecision != "medium" || st.PatchSDPA || st.SDPAPatched || !st.Deterministic {
		t.Errorf("state = %+v", st)
	}
	want := Flags{MatmulPrecision: "medium", AllowTF32CuBLAS: true, AllowTF32CuDNN: true, FlashSDP: true,
		Deterministic: true, DeterministicCuDNN: true}
	if e.flags != want {
		t.Errorf("flags = %+v, want %+v", e.flags, want)
	}
	p.Uninstall()
	// Explicit options win over the environment.
	off, on := false, true
	st, err = p.Install(Options{AttentionBackend: "math", MatmulPrecision: "high", PatchSDPA: &on, Deterministic: &off})
	if err != nil {
		t.Fatal(err)
	}
	if st.AttentionBackend != "math" || st.MatmulPrecision != "high" || !st.PatchSDPA || st.Deterministic {
		t.Errorf("explicit state = %+v", st)
	}
	if e.flags.FlashSDP || !e.flags.MathSDP || e.flags.Deterministic {
		t.Errorf("explicit flags = %+v", e.flags)
	}
}

func TestTF32Off(t *testing.T) {
	e := &fakeEngine{flags: torchDefaults()}
	p := NewPolicy(e, vars(map[string]string{EnvEnableTF32: "0", EnvMatmulPrecision: "medium"}))
	st, err := p.Install(Options{})
	if err != nil {
		t.Fatal(err)
	}
	// TF32 off means no TF32 anywhere: highest float32 matmul precision.
	if st.TF32Enabled || st.MatmulPrecision != "highest" || e.flags.AllowTF32CuBLAS || e.flags.AllowTF32CuDNN {
		t.Errorf("state %+v, flags %+v", st, e.flags)
	}
}

// TestAttentionDispatchNames checks the seed's rule: an attention dispatch
// backend name, known or not, resolves the SDPA policy to auto and is
// recorded for the attention layer; only a value that is not a name fails.
func TestAttentionDispatchNames(t *testing.T) {
	var logs strings.Builder
	saved := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	t.Cleanup(func() { slog.SetDefault(saved) })
	for name, want := range map[string]string{
		"flash_attention_2": "flash_attention_2", "flash-attn-2": "flash_attention_2", "Flash_Attn2": "flash_attention_2",
		"sage_attention": "sage_attention", "SAGE": "sage_attention", "sage3": "sage_attention_3",
		"xformers": "xformers", "torch_sdpa": "torch", "vmoba": "vmoba_attention",
		// Not in the dispatch vocabulary: accepted as given (lower case).
		"flex_attention": "flex_attention", "native": "native", "Ring-Attention": "ring_attention",
	} {
		e := &fakeEngine{flags: torchDefaults()}
		p := NewPolicy(e, vars(map[string]string{EnvAttentionBackend: name}))
		st, err := p.Install(Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if st.AttentionBackend != "auto" || st.AttentionDispatch != want || !e.flags.FlashSDP || !e.flags.MathSDP {
			t.Errorf("%s: state %+v flags %+v; want policy auto, dispatch %q", name, st, e.flags, want)
		}
	}
	// Only the names outside the vocabulary are warned about, once each.
	for _, name := range []string{"flex_attention", "native", "ring_attention"} {
		if n := strings.Count(logs.String(), "name="+name+" "); n != 1 {
			t.Errorf("%d warnings for %s, want 1:\n%s", n, name, logs.String())
		}
	}
	if strings.Contains(logs.String(), "flash_attention_2") || strings.Contains(logs.String(), "sage") {
		t.Errorf("a known dispatch name was warned about:\n%s", logs.String())
	}
	for value, want := range map[string]string{
		"cudnn": "cudnn", "efficient": "efficient", "mem_efficient": "efficient", "memory-efficient": "efficient",
		"sdpa": "auto", "default": "auto", "flash_attention": "flash", " MATH ": "math", "": "auto",
	} {
		st, err := NewPolicy(nil, vars(nil)).Install(Options{AttentionBackend: value})
		if err != nil || st.AttentionBackend != want || st.AttentionDispatch != "" {
			t.Errorf("%q: %+v, %v; want policy %s and no dispatch name", value, st, err, want)
		}
	}
	for _, bad := range []string{"flash attention", "a/b", "2fa", "x=y"} {
		if _, err := NewPolicy(nil, vars(nil)).Install(Options{AttentionBackend: bad}); err == nil || !strings.Contains(err.Error(), "neither an SDPA policy") {
			t.Errorf("%q: error = %v, want one saying it is not a name", bad, err)
		}
	}
}

func TestInvalidValuesChangeNothing(t *testing.T) {
	cases := map[string]string{
		EnvAttentionBackend: "fast est", EnvMatmulPrecision: "low", EnvEnableTF32: "perhaps",
		EnvPatchSDPA: "2", EnvDeterministic: "nope", EnvUseCoreInfra: "maybe",
	}
	for name, value := range cases {
		e := &fakeEngine{flags: torchDefaults()}
		p := NewPolicy(e, vars(map[string]string{name: value}))
		st, err := p.Install(Options{})
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%s: error = %v, want it named", name, value, err)
		}
		if st.Installed || e.sets != 0 {
			t.Errorf("%s=%s: installed %v, %d writes", name, value, st.Installed, e.sets)
		}
	}
}

func TestUseCoreInfraOff(t *testing.T) {
	e := &fakeEngine{flags: torchDefaults()}
	p := NewPolicy(e, vars(map[string]string{EnvUseCoreInfra: "0"}))
	st, err := p.Install(Options{})
	if err != nil || st.Installed || !st.DisabledByEnv || e.sets != 0 {
		t.Errorf("USE_CORE_INFRA=0: %+v, %v, %d writes", st, err, e.sets)
	}
}

func TestEngineFailures(t *testing.T) {
	e := &fakeEngine{flags: torchDefaults(), failRead: true}
	if _, err := NewPolicy(e, vars(nil)).Install(Options{}); err == nil {
		t.Error("install with unreadable flags succeeded")
	}
	e = &fakeEngine{flags: torchDefaults(), failSet: true}
	p := NewPolicy(e, vars(nil))
	if st, err := p.Install(Options{}); err == nil || st.Installed {
		t.Errorf("install with unwritable flags = %+v, %v", st, err)
	}
}

func TestDisabledScope(t *testing.T) {
	e := &fakeEngine{flags: torchDefaults()}
	p := NewPolicy(e, vars(map[string]string{EnvMatmulPrecision: "medium"}))
	if _, err := p.Install(Options{AttentionBackend: "math"}); err != nil {
		t.Fatal(err)
	}
	err := p.Disabled(func() error {
		if st := p.State(); st.Installed || !st.DisabledScope {
			t.Errorf("inside scope: %+v", st)
		}
		if e.flags != torchDefaults() {
			t.Errorf("inside scope flags = %+v, want the originals", e.flags)
		}
		// Install is a no-op inside; scopes nest.
		if st, _ := p.Install(Options{}); st.Installed {
			t.Error("Install inside a disabled scope installed")
		}
		return p.Disabled(func() error { return errors.New("inner") })
	})
	if err == nil || err.Error() != "inner" {
		t.Errorf("Disabled returned %v, want the function's error", err)
	}
	st := p.State()
	if !st.Installed || st.DisabledScope || st.AttentionBackend != "math" || e.flags.MatmulPrecision != "medium" || e.flags.FlashSDP {
		t.Errorf("after scope: state %+v flags %+v, want the policy re-installed with its options", st, e.flags)
	}
	// A scope entered while not installed does not install at its end.
	p.Uninstall()
	p.Disabled(func() error { return nil })
	if p.State().Installed {
		t.Error("scope installed a policy that was not installed")
	}
	// Uninstall inside a scope cancels the re-install.
	p.Install(Options{})
	p.Disabled(func() error { p.Uninstall(); return nil })
	if p.State().Installed {
		t.Error("re-installed after an explicit Uninstall in the scope")
	}
}

func TestConcurrentUse(t *testing.T) {
	e := &fakeEngine{flags: torchDefaults()}
	p := NewPolicy(e, vars(nil))
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for k := 0; k < 100; k++ {
				switch (i + k) % 4 {
				case 0:
					p.Install(Options{})
				case 1:
					p.Uninstall()
				case 2:
					p.Disabled(func() error { _ = p.State(); return nil })
				default:
					_ = p.State()
				}
			}
		}(i)
	}
	wg.Wait()
	// Whatever interleaving happened, uninstall restores the originals.
	p.Uninstall()
	if e.flags != torchDefaults() {
		t.Errorf("flags after concurrent use and uninstall = %+v", e.flags)
	}
}

func TestProcessPolicy(t *testing.T) {
	t.Setenv(EnvMatmulPrecision, "highest")
	old := process
	process = NewPolicy(nil, nil)
	defer func() { process = old }()
	e := &fakeEngine{flags: torchDefaults()}
	process.SetEngine(e)
	st, err := Install(Options{})
	if err != nil || !st.Installed || !st.Applied || CurrentState() != st || st.MatmulPrecision != "highest" {
		t.Fatalf("Install() = %+v, %v", st, err)
	}
	if err := Disabled(func() error {
		if CurrentState().Installed {
			t.Error("installed inside Disabled")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if st, _ := Uninstall(); st.Installed {
		t.Error("still installed")
	}
}

func TestParseBool(t *testing.T) {
	for _, s := range []string{"1", "true", "YES", " on "} {
		if v, err := ParseBool("X", s); err != nil || !v {
			t.Errorf("ParseBool(%q) = %v, %v", s, v, err)
		}
	}
	for _, s := range []string{"0", "False", "no", "off"} {
		if v, err := ParseBool("X", s); err != nil || v {
			t.Errorf("ParseBool(%q) = %v, %v", s, v, err)
		}
	}
	for _, s := range []string{"enable", "Enabled"} {
		if v, err := ParseBool("X", s); err != nil || !v {
			t.Errorf("ParseBool(%q) = %v, %v (the seed's word for on)", s, v, err)
		}
	}
	for _, s := range []string{"disable", "DISABLED"} {
		if v, err := ParseBool("X", s); err != nil || v {
			t.Errorf("ParseBool(%q) = %v, %v (the seed's word for off)", s, v, err)
		}
	}
	// y/t and n/f are wfgen's own (docs/differences.md, switch values).
	for _, s := range []string{"y", "T"} {
		if v, err := ParseBool("X", s); err != nil || !v {
			t.Errorf("ParseBool(%q) = %v, %v (wfgen's short word for on)", s, v, err)
		}
	}
	for _, s := range []string{"N", "f"} {
		if v, err := ParseBool("X", s); err != nil || v {
			t.Errorf("ParseBool(%q) = %v, %v (wfgen's short word for off)", s, v, err)
		}
	}
	// Anything else is an error, where the seed keeps the default.
	for _, s := range []string{"2", "maybe", "ja", "onn", "-1"} {
		if _, err := ParseBool("X", s); err == nil {
			t.Errorf("ParseBool(%q) accepted", s)
		}
	}
	if _, err := ParseBool("X", "2"); err == nil || !strings.Contains(err.Error(), `X="2"`) {
		t.Errorf("ParseBool(2) error = %v", err)
	}
}

// TestPatchSDPARecordedOnly: WORLDFOUNDRY_PATCH_SDPA is read and recorded
// (State.PatchSDPA) but patches nothing — there is no Python function to
// patch under libtorch — so SDPAPatched stays false and the engine gets the
// same flags whatever its value (docs/differences.md).
func TestPatchSDPARecordedOnly(t *testing.T) {
	var flags []Flags
	for _, v := range []string{"", "1", "0"} {
		e := &fakeEngine{flags: torchDefaults()}
		st, err := NewPolicy(e, vars(map[string]string{EnvPatchSDPA: v})).Install(Options{})
		if err != nil {
			t.Fatal(err)
		}
		if want := v != "0"; st.PatchSDPA != want || st.SDPAPatched {
			t.Errorf("%s=%q: PatchSDPA %v SDPAPatched %v; want %v and false", EnvPatchSDPA, v, st.PatchSDPA, st.SDPAPatched, want)
		}
		flags = append(flags, e.flags)
	}
	if flags[0] != flags[1] || flags[1] != flags[2] {
		t.Errorf("the flags depend on %s: %+v", EnvPatchSDPA, flags)
	}
}

// TestCuDNNAndEfficientRunAsAuto: libtorch 1.13 has switches for the flash
// and math SDPA kernels only, so the cudnn and efficient policies are
// recorded but write the flags auto writes (docs/differences.md), while
// flash and math each turn the other kernel off.
func TestCuDNNAndEfficientRunAsAuto(t *testing.T) {
	flagsOf := func(policy string) (State, Flags) {
		e := &fakeEngine{flags: Flags{MatmulPrecision: PrecisionHighest}} // both kernels off before
		st, err := NewPolicy(e, vars(nil)).Install(Options{AttentionBackend: policy})
		if err != nil {
			t.Fatal(err)
		}
		return st, e.flags
	}
	_, auto := flagsOf(AttentionAuto)
	if !auto.FlashSDP || !auto.MathSDP {
		t.Fatalf("auto flags %+v: want both kernels on", auto)
	}
	for _, p := range []string{AttentionCuDNN, AttentionEfficient} {
		st, f := flagsOf(p)
		if st.AttentionBackend != p || f != auto {
			t.Errorf("%s: state %q, flags %+v; want the policy recorded and auto's flags %+v", p, st.AttentionBackend, f, auto)
		}
	}
	if _, f := flagsOf(AttentionFlash); !f.FlashSDP || f.MathSDP {
		t.Errorf("flash flags %+v", f)
	}
	if _, f := flagsOf(AttentionMath); f.FlashSDP || !f.MathSDP {
		t.Errorf("math flags %+v", f)
	}
}

func FuzzInstallFromEnvironment(f *testing.F) {
	f.Add("auto", "high", "1", "1", "", "1")
	f.Add("flash_attention_2", "MEDIUM", "0", "off", "yes", "")
	f.Add("bogus", "x", "y", "z", "w", "v")
	f.Fuzz(func(t *testing.T, att, prec, tf32, patch, det, use string) {
		e := &fakeEngine{flags: torchDefaults()}
		p := NewPolicy(e, vars(map[string]string{EnvAttentionBackend: att, EnvMatmulPrecision: prec,
			EnvEnableTF32: tf32, EnvPatchSDPA: patch, EnvDeterministic: det, EnvUseCoreInfra: use}))
		st, err := p.Install(Options{})
		if err != nil {
			if st.Installed || e.sets != 0 {
				t.Fatalf("failed install changed state: %+v, %d writes", st, e.sets)
			}
			return
		}
		if st.Installed {
			if !slices.Contains(attentionPolicies, st.AttentionBackend) {
				t.Fatalf("attention backend %q", st.AttentionBackend)
			}
			if e.flags.MatmulPrecision != st.MatmulPrecision {
				t.Fatalf("state precision %q, engine %q", st.MatmulPrecision, e.flags.MatmulPrecision)
			}
			p.Uninstall()
			if e.flags != torchDefaults() {
				t.Fatalf("uninstall left %+v", e.flags)
			}
		}
	})
}
