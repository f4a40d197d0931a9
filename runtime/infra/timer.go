package infra

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/worldfoundry/wfgen/runtime/engine"
)

// EnvSyncTimer is the default variable that switches SyncTimer on.
const EnvSyncTimer = "SYNC_TIMER"

// TimerOptions configure a SyncTimer.
type TimerOptions struct {
	// Name labels the measurement: with a name, each measurement logs
	// "NAME takes 1.2345s" (the seed's line); without one it logs nothing
	// and Stop only returns the time.
	Name string
	// FlagEnv is the variable that enables the timer (default SYNC_TIMER).
	// It is read when a measurement starts, so setting it later turns an
	// existing timer on. Values as ParseBool; unset or invalid means off.
	FlagEnv string
	// Device is synchronised before the clock starts and before it stops:
	// "" means the current CUDA device; "cpu" never waits.
	Device string
	// Log receives each line; nil logs through log/slog.
	Log func(string)
	// Sync waits for the device; nil uses the registered runtime engine
	// (no waiting when none is registered).
	Sync engine.Synchronizer
	// Getenv reads FlagEnv; nil is os.Getenv.
	Getenv func(string) string
}

// SyncTimer is the seed's CudaSyncTimer: when its variable is on, it
// synchronises the device around a block or function so the measured time
// includes the queued GPU work, and logs it. When off it reads one variable
// and measures nothing. Use it around a block:
//
//	span := timer.Start()
//	...
//	span.Stop()
//
// or around a function with Time, Wrap (func() error) or WrapFunc (any
// one-argument function; Go has no decorator over every signature, so
// other shapes close over their arguments in a func() error).
type SyncTimer struct {
	name    string
	flagEnv string
	getenv  func(string) string
	device  string
	log     func(string)
	sync    engine.Synchronizer
}

// NewSyncTimer returns a timer. Whether it measures is decided by its
// variable at each Start, not here.
func NewSyncTimer(o TimerOptions) *SyncTimer {
	env := o.FlagEnv
	if env == "" {
		env = EnvSyncTimer
	}
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	return &SyncTimer{name: o.Name, flagEnv: env, getenv: getenv, device: o.Device, log: o.Log, sync: o.Sync}
}

// Enabled reports whether the timer's variable is on now.
func (t *SyncTimer) Enabled() bool {
	s := t.getenv(t.flagEnv)
	if strings.TrimSpace(s) == "" {
		return false
	}
	on, _ := ParseBool(t.flagEnv, s) // an invalid value leaves the timer off
	return on
}

// Span is one running measurement.
type Span struct {
	t     *SyncTimer
	start time.Time
}

func (t *SyncTimer) synchronize() error {
	if t.device == "cpu" {
		return nil
	}
	s := t.sync
	if s == nil {
		e, err := engine.DefaultEngine()
		if err != nil {
			return nil // no engine: nothing queued anywhere
		}
		es, ok := e.(engine.Synchronizer)
		if !ok {
			return nil // an engine without device queues
		}
		s = es
	}
	return s.Synchronize(t.device)
}

// label names the timer in a failure line: its name, else its variable.
func (t *SyncTimer) label() string {
	if t.name != "" {
		return t.name
	}
	return t.flagEnv
}

// Start reads the timer's variable; when it is on, Start synchronises the
// device and starts the clock. When it is off the Span does nothing.
func (t *SyncTimer) Start() Span {
	if !t.Enabled() {
		return Span{}
	}
	if err := t.synchronize(); err != nil {
		t.emit(fmt.Sprintf("%s: synchronize failed: %v", t.label(), err))
	}
	return Span{t: t, start: time.Now()}
}

// Stop synchronises the device, stops the clock, logs "NAME takes 1.2345s"
// when the timer has a name, and returns the elapsed time; 0 when the
// measurement did not run.
func (s Span) Stop() time.Duration {
	if s.t == nil {
		return 0
	}
	if err := s.t.synchronize(); err != nil {
		s.t.emit(fmt.Sprintf("%s: synchronize failed: %v", s.t.label(), err))
	}
	d := time.Since(s.start)
	if s.t.name != "" {
		s.t.emit(fmt.Sprintf("%s takes %.4fs", s.t.name, d.Seconds()))
	}
	return d
}

func (t *SyncTimer) emit(line string) {
	if t.log != nil {
		t.log(line)
		return
	}
	slog.Info(line, "timer", t.label())
}

// Time runs fn inside a measurement and returns fn's error.
func (t *SyncTimer) Time(fn func() error) error {
	s := t.Start()
	defer s.Stop()
	return fn()
}

// Wrap returns fn wrapped in a measurement (the seed's decorator form);
// each call is one measurement, and the variable is read at each call.
func (t *SyncTimer) Wrap(fn func() error) func() error {
	return func() error { return t.Time(fn) }
}

// WrapFunc is Wrap for a function with an argument and a result: each call
// of the returned function is one measurement of fn.
func WrapFunc[A, R any](t *SyncTimer, fn func(A) (R, error)) func(A) (R, error) {
	return func(a A) (R, error) {
		s := t.Start()
		defer s.Stop()
		return fn(a)
	}
}
