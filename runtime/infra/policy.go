// Package infra holds wfgen's process-wide inference policy: the seed's
// install / uninstall / state / disabled scope driven by the WORLDFOUNDRY_*
// variables, a CUDA-synchronised timer switched by SYNC_TIMER, and dropping
// cached runtimes and accelerator memory.
//
// It is pure Go (no cgo). An execution engine that can read and write
// libtorch's process-global flags (at::globalContext()) implements
// FlagEngine; the process policy applies flags through the registered
// runtime engine when it is one (runtime/torch's is). Without such an
// engine, Install resolves and records the policy only (State.Applied is
// false).
//
// docs/engine.md describes each variable and what it does on libtorch 1.13.
package infra

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/worldfoundry/wfgen/runtime/engine"
)

// Environment variables read by Install when the matching Options field is
// unset.
const (
	EnvUseCoreInfra     = "WORLDFOUNDRY_USE_CORE_INFRA"
	EnvAttentionBackend = "WORLDFOUNDRY_ATTENTION_BACKEND"
	EnvMatmulPrecision  = "WORLDFOUNDRY_MATMUL_PRECISION"
	EnvEnableTF32       = "WORLDFOUNDRY_ENABLE_TF32"
	EnvPatchSDPA        = "WORLDFOUNDRY_PATCH_SDPA"
	EnvDeterministic    = "WORLDFOUNDRY_DETERMINISTIC"
)

// Attention backend policies (WORLDFOUNDRY_ATTENTION_BACKEND).
const (
	AttentionAuto      = "auto"
	AttentionFlash     = "flash"
	AttentionCuDNN     = "cudnn"
	AttentionEfficient = "efficient"
	AttentionMath      = "math"
)

// Matmul precisions (WORLDFOUNDRY_MATMUL_PRECISION).
const (
	PrecisionHighest = "highest"
	PrecisionHigh    = "high"
	PrecisionMedium  = "medium"
)

var attentionPolicies = []string{AttentionAuto, AttentionFlash, AttentionCuDNN, AttentionEfficient, AttentionMath}

// policyAliases are other names of SDPA policies (the seed's aliases).
var policyAliases = map[string]string{
	"default": AttentionAuto, "sdpa": AttentionAuto,
	"mem_efficient": AttentionEfficient, "memory_efficient": AttentionEfficient,
	"flash_attention": AttentionFlash,
}

// dispatchAliases map the attention dispatch layer's names to their
// canonical form (the Python runtime's worldfoundry.core.attention
// vocabulary). A dispatch name resolves the SDPA policy to auto and is
// recorded in State.AttentionDispatch for the attention layer (the model)
// to honour. Names not listed here are accepted as they are (see
// resolveAttention).
var dispatchAliases = map[string]string{
	"torch": "torch", "torch_sdpa": "torch",
	"flash_attn":        "flash_attention",
	"flash_attention_2": "flash_attention_2", "flash_attn_2": "flash_attention_2", "flash_attn2": "flash_attention_2",
	"flash_attention_3": "flash_attention_3", "flash_attn_3": "flash_attention_3", "flash_attn3": "flash_attention_3",
	"sage": "sage_attention", "sage_attn": "sage_attention", "sage_attention": "sage_attention",
	"sage3": "sage_attention_3", "sage_attn_three": "sage_attention_3", "sage_attention_3": "sage_attention_3",
	"xformers": "xformers", "xformers_attention": "xformers",
	"video_sparse_attn": "video_sparse_attention", "video_sparse_attention": "video_sparse_attention",
	"vmoba": "vmoba_attention", "vmoba_attn": "vmoba_attention", "vmoba_attention": "vmoba_attention",
	"sla": "sla_attention", "sla_attn": "sla_attention", "sla_attention": "sla_attention",
	"sage_sla": "sage_sla_attention", "sage_sla_attn": "sage_sla_attention", "sage_sla_attention": "sage_sla_attention",
}

// dispatchName is the shape of an attention dispatch backend name.
var dispatchName = regexp.MustCompile(`^[a-z][a-z0-9_.]*$`)

// resolveAttention reads an attention backend value: an SDPA policy or one
// of its aliases gives the policy; any other name is an attention dispatch
// backend name (the seed accepts them generally), which gives policy auto
// and the name, canonical when the dispatch vocabulary knows it. Case is
// ignored and '-' reads as '_'. A name outside the dispatch vocabulary is
// accepted with a warning, once per name and policy (warned holds the names
// warned about), since no layer of this process can check it; a value that
// is not a name at all ("flash attention", "a/b") is an error.
func resolveAttention(value, source string, warned *sync.Map) (policy, dispatch string, err error) {
	v := strings.ReplaceAll(strings.ToLower(strings.TrimSpace(value)), "-", "_")
	if a, ok := policyAliases[v]; ok {
		v = a
	}
	if v == "" {
		return AttentionAuto, "", nil
	}
	if slices.Contains(attentionPolicies, v) {
		return v, "", nil
	}
	if c, ok := dispatchAliases[v]; ok {
		return AttentionAuto, c, nil
	}
	if !dispatchName.MatchString(v) {
		return "", "", fmt.Errorf("%s: %q is neither an SDPA policy (%s) nor an attention dispatch backend name (a letter, then letters, digits, '_', '-' or '.', e.g. flash_attention_2)",
			source, value, strings.Join(attentionPolicies, ", "))
	}
	if _, seen := warned.LoadOrStore(v, true); !seen {
		slog.Warn("attention backend is not an SDPA policy nor a known attention dispatch name; recorded for the model's attention layer, SDPA policy auto",
			"source", source, "name", v, "policies", strings.Join(attentionPolicies, ","))
	}
	return AttentionAuto, v, nil
}

// Flags are libtorch's process-global backend flags (at::globalContext()).
type Flags struct {
	// MatmulPrecision is "highest", "high" or "medium".
	MatmulPrecision string
	// AllowTF32CuBLAS is read only: libtorch 1.13 derives it from
	// MatmulPrecision (TF32 in cuBLAS ⇔ precision is not "highest").
	AllowTF32CuBLAS bool
	// AllowTF32CuDNN allows TF32 in cuDNN convolutions.
	AllowTF32CuDNN bool
	// FlashSDP and MathSDP enable the fused flash and the math
	// scaled-dot-product-attention kernels (the only two switches 1.13 has).
	FlashSDP, MathSDP bool
	// Deterministic and DeterministicWarnOnly are use_deterministic_algorithms.
	Deterministic, DeterministicWarnOnly bool
	// DeterministicCuDNN and BenchmarkCuDNN are the cuDNN switches.
	DeterministicCuDNN, BenchmarkCuDNN bool
}

// FlagEngine reads and writes the process-global flags of an execution engine.
type FlagEngine interface {
	// GlobalFlags returns the current flags.
	GlobalFlags() (Flags, error)
	// SetGlobalFlags writes every flag but the read-only ones.
	SetGlobalFlags(Flags) error
}

// Options are explicit install arguments; a zero field falls back to its
// environment variable, then to the seed's default.
type Options struct {
	// AttentionBackend is a policy (auto, flash, cudnn, efficient, math) or
	// an attention dispatch name (flash_attention_2, sage_attention, ...).
	// Default "auto".
	AttentionBackend string
	// MatmulPrecision is highest, high or medium. Default "high".
	MatmulPrecision string
	// EnableTF32 enables TF32 backend flags. Default true.
	EnableTF32 *bool
	// PatchSDPA requests the SDPA compatibility patch. Default true. There is
	// no Python function to patch under libtorch: recorded only.
	PatchSDPA *bool
	// Deterministic enables deterministic algorithms and cuDNN deterministic
	// mode. Default: leave the flags as found.
	Deterministic *bool
}

// State is the observable process-wide policy state.
type State struct {
	// Installed says the policy is installed.
	Installed bool
	// DisabledByEnv says WORLDFOUNDRY_USE_CORE_INFRA turned installation off.
	DisabledByEnv bool
	// DisabledScope says a Disabled scope is active.
	DisabledScope bool
	// SDPAPatched says an SDPA compatibility patch is active; always false
	// under libtorch (there is nothing to patch in C++).
	SDPAPatched bool
	// PatchSDPA records the requested WORLDFOUNDRY_PATCH_SDPA value.
	PatchSDPA bool
	// AttentionBackend is the normalised SDPA policy.
	AttentionBackend string
	// AttentionDispatch is the dispatch backend name given instead of a
	// policy (e.g. "flash_attention_2"), or "".
	AttentionDispatch string
	// MatmulPrecision is the float32 matmul precision in effect.
	MatmulPrecision string
	// TF32Enabled says TF32 backend flags are on.
	TF32Enabled bool
	// Deterministic says deterministic algorithms are on.
	Deterministic bool
	// Applied says the flags were written through a FlagEngine; false means
	// the policy was resolved and recorded only.
	Applied bool
	// Flags are the engine's flags after install (when Applied).
	Flags Flags
}

// defaultState is the seed's WorldFoundryInferenceInfraState defaults.
func defaultState() State {
	return State{AttentionBackend: AttentionAuto, MatmulPrecision: PrecisionHigh, TF32Enabled: true}
}

// Policy is one process policy. The package functions use a process-wide
// Policy; tests build their own with NewPolicy. A Policy is safe for
// concurrent use.
type Policy struct {
	mu       sync.Mutex
	engine   FlagEngine
	getenv   func(string) string
	state    State
	before   *Flags  // engine flags found by Install, restored by Uninstall
	opts     Options // explicit options of the last Install
	disabled int     // depth of active Disabled scopes
	// reinstall says the outermost Disabled scope uninstalled the policy and
	// installs it again, with reinstallOpts, when the last scope ends.
	reinstall     bool
	reinstallOpts Options
	// warned holds the unknown attention dispatch names warned about.
	warned sync.Map
}

// registeredFlags returns the registered runtime engine when it can read
// and write flags (it implements FlagEngine), else nil.
func registeredFlags() FlagEngine {
	e, err := engine.DefaultEngine()
	if err != nil {
		return nil
	}
	f, _ := e.(FlagEngine)
	return f
}

// NewPolicy returns a policy that applies flags through engine (nil: record
// only; the process policy uses the registered runtime engine) and reads
// variables with getenv (nil: os.Getenv).
func NewPolicy(engine FlagEngine, getenv func(string) string) *Policy {
	if getenv == nil {
		getenv = os.Getenv
	}
	return &Policy{engine: engine, getenv: getenv, state: defaultState()}
}

// SetEngine sets the engine flags are applied through. It does not re-apply
// an installed policy.
func (p *Policy) SetEngine(e FlagEngine) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.engine = e
}

// State returns a copy of the current state. Unlike the seed's
// inference_infra_state, which hands out the live singleton, it is a
// snapshot: the state is guarded by p's mutex, so a live pointer would be
// read while Install, Uninstall and Disabled write it (a data race), and a
// caller could change it without the lock. Call State again to see later
// changes; change the policy only through Install, Uninstall and Disabled.
func (p *Policy) State() State {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state
}

// resolved is an Options with every field decided.
type resolved struct {
	attention     string
	dispatch      string
	precision     string
	tf32          bool
	patchSDPA     bool
	deterministic *bool
}

func (p *Policy) resolve(o Options) (resolved, error) {
	r := resolved{attention: AttentionAuto, precision: PrecisionHigh, tf32: true, patchSDPA: true}
	att, attSrc := o.AttentionBackend, "attention backend"
	if att == "" {
		att, attSrc = p.getenv(EnvAttentionBackend), EnvAttentionBackend
	}
	var err error
	if r.attention, r.dispatch, err = resolveAttention(att, attSrc, &p.warned); err != nil {
		return r, err
	}
	prec, precSrc := o.MatmulPrecision, "matmul precision"
	if prec == "" {
		prec, precSrc = p.getenv(EnvMatmulPrecision), EnvMatmulPrecision
	}
	if prec = strings.ToLower(strings.TrimSpace(prec)); prec != "" {
		if prec != PrecisionHighest && prec != PrecisionHigh && prec != PrecisionMedium {
			return r, fmt.Errorf("%s: unknown value %q: want highest, high or medium", precSrc, prec)
		}
		r.precision = prec
	}
	if r.tf32, err = p.boolOpt(o.EnableTF32, EnvEnableTF32, true); err != nil {
		return r, err
	}
	if r.patchSDPA, err = p.boolOpt(o.PatchSDPA, EnvPatchSDPA, true); err != nil {
		return r, err
	}
	if o.Deterministic != nil {
		v := *o.Deterministic
		r.deterministic = &v
	} else if s := p.getenv(EnvDeterministic); strings.TrimSpace(s) != "" {
		v, err := ParseBool(EnvDeterministic, s)
		if err != nil {
			return r, err
		}
		r.deterministic = &v
	}
	return r, nil
}

func (p *Policy) boolOpt(explicit *bool, env string, def bool) (bool, error) {
	if explicit != nil {
		return *explicit, nil
	}
	s := p.getenv(env)
	if strings.TrimSpace(s) == "" {
		return def, nil
	}
	return ParseBool(env, s)
}

// ParseBool parses a switch variable: 1/true/yes/on/enable(d) or
// 0/false/no/off/disable(d) (the seed's words), also y/t and n/f, case
// insensitive. Anything else is an error naming the variable, where the
// seed silently keeps the default.
func ParseBool(name, value string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(value)) {
	case "1", "true", "yes", "on", "enable", "enabled", "y", "t":
		return true, nil
	case "0", "false", "no", "off", "disable", "disabled", "n", "f":
		return false, nil
	}
	return false, fmt.Errorf("%s=%q: want 1/true/yes/on or 0/false/no/off", name, value)
}

// target computes the flags to write from the flags found and the policy.
func target(before Flags, r resolved) Flags {
	f := before
	f.MatmulPrecision = r.precision
	if r.tf32 {
		f.AllowTF32CuDNN = true
	} else {
		// On libtorch 1.13 cuBLAS TF32 is "precision != highest", so turning
		// TF32 off means highest float32 matmul precision.
		f.AllowTF32CuDNN = false
		f.MatmulPrecision = PrecisionHighest
	}
	f.AllowTF32CuBLAS = f.MatmulPrecision != PrecisionHighest
	switch r.attention {
	case AttentionFlash:
		f.FlashSDP, f.MathSDP = true, false
	case AttentionMath:
		f.FlashSDP, f.MathSDP = false, true
	default:
		// auto, and cudnn / efficient, which have no kernel switch in 1.13.
		f.FlashSDP, f.MathSDP = true, true
	}
	if r.deterministic != nil {
		d := *r.deterministic
		f.Deterministic = d
		f.DeterministicWarnOnly = false
		f.DeterministicCuDNN = d
		if d {
			f.BenchmarkCuDNN = false
		}
	}
	return f
}

// Install installs the policy once for the process: it resolves opts (then
// the WORLDFOUNDRY_* variables, then the seed's defaults), saves the engine's
// flags and writes the policy's flags. It is idempotent: while installed, or
// inside a Disabled scope, or with WORLDFOUNDRY_USE_CORE_INFRA=0, it changes
// nothing and returns the current state. An invalid value is an error naming
// its variable, and nothing is changed.
func (p *Policy) Install(opts Options) (State, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state.Installed || p.disabled > 0 {
		return p.state, nil
	}
	if s := p.getenv(EnvUseCoreInfra); strings.TrimSpace(s) != "" {
		on, err := ParseBool(EnvUseCoreInfra, s)
		if err != nil {
			return p.state, err
		}
		if !on {
			p.state.DisabledByEnv = true
			return p.state, nil
		}
	}
	p.state.DisabledByEnv = false
	return p.installLocked(opts)
}

func (p *Policy) installLocked(opts Options) (State, error) {
	r, err := p.resolve(opts)
	if err != nil {
		return p.state, err
	}
	st := State{
		Installed:         true,
		PatchSDPA:         r.patchSDPA,
		AttentionBackend:  r.attention,
		AttentionDispatch: r.dispatch,
		MatmulPrecision:   r.precision,
		TF32Enabled:       r.tf32,
	}
	if r.deterministic != nil {
		st.Deterministic = *r.deterministic
	}
	if !r.tf32 {
		st.MatmulPrecision = PrecisionHighest
	}
	if p.engine == nil && p == process {
		p.engine = registeredFlags()
	}
	if p.engine != nil {
		before, err := p.engine.GlobalFlags()
		if err != nil {
			return p.state, fmt.Errorf("install: reading engine flags: %w", err)
		}
		want := target(before, r)
		if err := p.engine.SetGlobalFlags(want); err != nil {
			if rerr := p.engine.SetGlobalFlags(before); rerr != nil {
				err = errors.Join(err, fmt.Errorf("restoring flags: %w", rerr))
			}
			return p.state, fmt.Errorf("install: writing engine flags: %w", err)
		}
		after, err := p.engine.GlobalFlags()
		if err != nil {
			return p.state, fmt.Errorf("install: reading engine flags: %w", err)
		}
		p.before = &before
		st.Applied = true
		st.Flags = after
		st.MatmulPrecision = after.MatmulPrecision
		st.Deterministic = after.Deterministic
	}
	p.opts = opts
	p.state = st
	return st, nil
}

// Uninstall restores the engine flags found by Install and marks the policy
// uninstalled; inside a Disabled scope it also cancels the re-install at the
// scope's end. Without an installed policy it does nothing.
func (p *Policy) Uninstall() (State, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reinstall = false
	return p.uninstallLocked()
}

func (p *Policy) uninstallLocked() (State, error) {
	if !p.state.Installed {
		return p.state, nil
	}
	if p.before != nil && p.engine != nil {
		if err := p.engine.SetGlobalFlags(*p.before); err != nil {
			return p.state, fmt.Errorf("uninstall: restoring engine flags: %w", err)
		}
	}
	p.before = nil
	st := defaultState()
	st.DisabledByEnv = p.state.DisabledByEnv
	st.DisabledScope = p.disabled > 0
	p.state = st
	return st, nil
}

// Disabled runs fn with the policy uninstalled (the seed's
// worldfoundry_inference_infra_disabled): Install is a no-op inside the
// scope, and a policy installed when the outermost scope began is installed
// again, with the same options, when it ends. Scopes nest.
func (p *Policy) Disabled(fn func() error) (err error) {
	p.mu.Lock()
	if p.state.Installed {
		if _, err := p.uninstallLocked(); err != nil {
			p.mu.Unlock()
			return err
		}
		p.reinstall = true
		p.reinstallOpts = p.opts
	}
	p.disabled++
	p.state.DisabledScope = true
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.disabled--
		p.state.DisabledScope = p.disabled > 0
		if p.disabled == 0 && p.reinstall {
			p.reinstall = false
			if _, rerr := p.installLocked(p.reinstallOpts); rerr != nil {
				err = errors.Join(err, fmt.Errorf("re-installing after disabled scope: %w", rerr))
			}
		}
	}()
	return fn()
}

var process = NewPolicy(nil, nil)

// Install installs the process policy (see Policy.Install).
func Install(opts Options) (State, error) { return process.Install(opts) }

// Uninstall uninstalls the process policy (see Policy.Uninstall).
func Uninstall() (State, error) { return process.Uninstall() }

// CurrentState returns the process policy's state (the seed's
// inference_infra_state), as a snapshot rather than the seed's live object
// (see Policy.State for why): call it again to observe later changes.
func CurrentState() State { return process.State() }

// Disabled runs fn with the process policy disabled (see Policy.Disabled).
func Disabled(fn func() error) error { return process.Disabled(fn) }
