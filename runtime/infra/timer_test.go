package infra

import (
	"errors"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

type fakeSync struct {
	mu      sync.Mutex
	devices []string
	err     error
}

func (f *fakeSync) Synchronize(device string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.devices = append(f.devices, device)
	return f.err
}

func (f *fakeSync) EmptyCache() error { return f.err }

func TestSyncTimerOff(t *testing.T) {
	s := &fakeSync{}
	var lines []string
	for _, v := range []string{"", "0", "garbage"} {
		tm := NewSyncTimer(TimerOptions{Name: "x", Sync: s, Log: func(l string) { lines = append(lines, l) },
			Getenv: vars(map[string]string{EnvSyncTimer: v})})
		if tm.Enabled() {
			t.Errorf("SYNC_TIMER=%q enabled the timer", v)
		}
		ran := false
		if err := tm.Time(func() error { ran = true; return nil }); err != nil || !ran {
			t.Errorf("Time: ran %v, %v", ran, err)
		}
		if d := tm.Start().Stop(); d != 0 {
			t.Errorf("disabled span measured %v", d)
		}
	}
	if len(s.devices) != 0 || len(lines) != 0 {
		t.Errorf("disabled timer synchronised %v and logged %v", s.devices, lines)
	}
}

func TestSyncTimerBlockAndFunc(t *testing.T) {
	s := &fakeSync{}
	var lines []string
	tm := NewSyncTimer(TimerOptions{Name: "decode", Device: "cuda:1", FlagEnv: "MY_TIMER", Sync: s,
		Log: func(l string) { lines = append(lines, l) }, Getenv: vars(map[string]string{"MY_TIMER": "1"})})
	if !tm.Enabled() {
		t.Fatal("MY_TIMER=1 did not enable the timer")
	}
	span := tm.Start()
	time.Sleep(2 * time.Millisecond)
	if d := span.Stop(); d < 2*time.Millisecond {
		t.Errorf("span = %v, want at least the 2ms slept", d)
	}
	want := errors.New("boom")
	wrapped := tm.Wrap(func() error { return want })
	if err := wrapped(); err != want {
		t.Errorf("wrapped error = %v", err)
	}
	if strings.Join(s.devices, ",") != "cuda:1,cuda:1,cuda:1,cuda:1" {
		t.Errorf("synchronised %v, want cuda:1 before start and stop of both measurements", s.devices)
	}
	re := regexp.MustCompile(`^decode takes \d+\.\d{4}s$`)
	if len(lines) != 2 || !re.MatchString(lines[0]) || !re.MatchString(lines[1]) {
		t.Errorf("log lines = %q", lines)
	}
}

func TestSyncTimerCPUAndErrors(t *testing.T) {
	s := &fakeSync{err: errors.New("device lost")}
	var lines []string
	tm := NewSyncTimer(TimerOptions{Name: "n", Device: "cpu", Sync: s, Log: func(l string) { lines = append(lines, l) },
		Getenv: vars(map[string]string{EnvSyncTimer: "on"})})
	tm.Start().Stop()
	if len(s.devices) != 0 || len(lines) != 1 {
		t.Errorf("cpu timer synchronised %v, logged %q", s.devices, lines)
	}
	lines = nil
	tm = NewSyncTimer(TimerOptions{Name: "n", Sync: s, Log: func(l string) { lines = append(lines, l) },
		Getenv: vars(map[string]string{EnvSyncTimer: "on"})})
	tm.Start().Stop()
	if len(lines) != 3 || !strings.Contains(lines[0], "synchronize failed: device lost") {
		t.Errorf("log = %q, want the synchronize failures reported", lines)
	}
}

func TestDropCaches(t *testing.T) {
	var order []string
	un1 := RegisterCacheDropper("b-modules", func() { order = append(order, "b") })
	un2 := RegisterCacheDropper("a-compiled", func() { order = append(order, "a") })
	defer un1()
	s := &fakeSync{}
	if err := dropCaches(s); err != nil {
		t.Fatal(err)
	}
	if strings.Join(order, "") != "ab" {
		t.Errorf("droppers ran in order %v, want name order", order)
	}
	un2()
	order = nil
	s.err = errors.New("cuda busy")
	if err := dropCaches(s); err == nil || !strings.Contains(err.Error(), "cuda busy") {
		t.Errorf("EmptyCache failure: error = %v", err)
	}
	if strings.Join(order, "") != "b" {
		t.Errorf("after unregistering: ran %v", order)
	}
	// Without an engine in this pure-Go package there is nothing to empty.
	if err := DropCaches(); err != nil {
		t.Errorf("DropCaches() without an engine = %v", err)
	}
}

// TestSyncTimerSeedBehaviour checks the seed's CudaSyncTimer rules: the flag
// is read when a measurement starts (not at construction), a timer without
// a name measures but logs nothing, and the decorator form takes functions
// with arguments and results.
func TestSyncTimerSeedBehaviour(t *testing.T) {
	s := &fakeSync{}
	env := map[string]string{}
	var lines []string
	logTo := func(l string) { lines = append(lines, l) }
	named := NewSyncTimer(TimerOptions{Name: "vae decode", Sync: s, Log: logTo, Getenv: vars(env)})
	if named.Enabled() || named.Start().Stop() != 0 || len(lines) != 0 {
		t.Fatalf("timer measured with %s unset: %q", EnvSyncTimer, lines)
	}
	env[EnvSyncTimer] = "1" // turned on after the timer was made
	if !named.Enabled() {
		t.Fatal("the flag set after construction was not seen")
	}
	span := named.Start()
	time.Sleep(time.Millisecond)
	if d := span.Stop(); d < time.Millisecond {
		t.Errorf("span = %v", d)
	}
	if len(lines) != 1 || !regexp.MustCompile(`^vae decode takes 0\.\d{4}s$`).MatchString(lines[0]) {
		t.Errorf("log = %q, want the seed's \"NAME takes X.XXXXs\"", lines)
	}
	env[EnvSyncTimer] = "0" // and off again
	if d := named.Start().Stop(); d != 0 || len(lines) != 1 {
		t.Errorf("timer measured after the flag was cleared: %v, %q", d, lines)
	}

	env[EnvSyncTimer] = "1"
	lines = nil
	anonymous := NewSyncTimer(TimerOptions{Sync: s, Log: logTo, Getenv: vars(env)})
	if d := anonymous.Start().Stop(); d <= 0 || len(lines) != 0 {
		t.Errorf("unnamed timer: %v, logged %q; want a measurement and no line", d, lines)
	}

	square := WrapFunc(named, func(x int) (int, error) { return x * x, nil })
	if got, err := square(7); got != 49 || err != nil {
		t.Errorf("wrapped square(7) = %d, %v", got, err)
	}
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "vae decode takes ") {
		t.Errorf("WrapFunc call logged %q", lines)
	}
}
