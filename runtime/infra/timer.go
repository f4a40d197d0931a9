package infra

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/worldfoundry/wfgen/runtime"
)

// EnvSyncTimer is the default variable that switches SyncTimer on.
const EnvSyncTimer = "SYNC_TIMER"

// Synchronizer waits for the work queued on a device (runtime.Engine has it).
type Synchronizer interface {
	Synchronize(device string) error
}

// TimerOptions configure a SyncTimer.
type TimerOptions struct {
	// Name labels the measurement in the log line.
	Name string
	// FlagEnv is the variable that enables the timer (default SYNC_TIMER);
	// values as ParseBool, an unset or invalid value means off.
	FlagEnv string
	// Device is synchronised before the clock starts and before it stops:
	// "" means the current CUDA device; "cpu" never waits.
	Device string
	// Log receives one line per measurement; nil logs through log/slog.
	Log func(string)
	// Sync waits for the device; nil uses the registered runtime engine
	// (no waiting when none is registered).
	Sync Synchronizer
	// Getenv reads FlagEnv; nil is os.Getenv.
	Getenv func(string) string
}

// SyncTimer is the seed's CudaSyncTimer: when its variable is on, it
// synchronises the device around a block or function so the measured time
// includes the queued GPU work, and logs it. When off it costs one branch and
// measures nothing. Use it around a block:
//
//	span := timer.Start()
//	...
//	span.Stop()
//
// or around a function with Time / Wrap.
type SyncTimer struct {
	name    string
	device  string
	enabled bool
	log     func(string)
	sync    Synchronizer
}

// NewSyncTimer returns a timer, enabled when its variable is on.
func NewSyncTimer(o TimerOptions) *SyncTimer {
	env := o.FlagEnv
	if env == "" {
		env = EnvSyncTimer
	}
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	on := false
	if s := getenv(env); strings.TrimSpace(s) != "" {
		on, _ = ParseBool(env, s) // an invalid value leaves the timer off
	}
	name := o.Name
	if name == "" {
		name = "block"
	}
	return &SyncTimer{name: name, device: o.Device, enabled: on, log: o.Log, sync: o.Sync}
}

// Enabled reports whether the timer measures.
func (t *SyncTimer) Enabled() bool { return t.enabled }

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
		e, err := runtime.DefaultEngine()
		if err != nil {
			return nil // no engine: nothing queued anywhere
		}
		s = e
	}
	return s.Synchronize(t.device)
}

// Start synchronises the device (when enabled) and starts the clock.
func (t *SyncTimer) Start() Span {
	if !t.enabled {
		return Span{}
	}
	if err := t.synchronize(); err != nil {
		t.emit(fmt.Sprintf("[%s] %s: synchronize failed: %v", EnvSyncTimer, t.name, err))
	}
	return Span{t: t, start: time.Now()}
}

// Stop synchronises the device, stops the clock, logs and returns the
// elapsed time; 0 when the timer is off.
func (s Span) Stop() time.Duration {
	if s.t == nil {
		return 0
	}
	if err := s.t.synchronize(); err != nil {
		s.t.emit(fmt.Sprintf("[%s] %s: synchronize failed: %v", EnvSyncTimer, s.t.name, err))
	}
	d := time.Since(s.start)
	s.t.emit(fmt.Sprintf("[%s] %s: %.3f ms", EnvSyncTimer, s.t.name, float64(d.Microseconds())/1000))
	return d
}

func (t *SyncTimer) emit(line string) {
	if t.log != nil {
		t.log(line)
		return
	}
	slog.Info(line, "timer", t.name)
}

// Time runs fn inside a measurement and returns fn's error.
func (t *SyncTimer) Time(fn func() error) error {
	s := t.Start()
	defer s.Stop()
	return fn()
}

// Wrap returns fn wrapped in a measurement (the seed's decorator form).
func (t *SyncTimer) Wrap(fn func() error) func() error {
	return func() error { return t.Time(fn) }
}
