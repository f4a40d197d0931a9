package infra

import (
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/worldfoundry/wfgen/internal/enginetest"
)

func TestSyncTimerOff(t *testing.T) {
	s := &enginetest.Engine{}
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
	if len(s.Syncs()) != 0 || len(lines) != 0 {
		t.Errorf("disabled timer synchronised %v and logged %v", s.Syncs(), lines)
	}
}

// The test runs in a synctest bubble: its clock moves only by the sleep, so
// the span measures exactly the 2 ms slept.
func TestSyncTimerBlockAndFunc(t *testing.T) { synctest.Test(t, testSyncTimerBlockAndFunc) }

func testSyncTimerBlockAndFunc(t *testing.T) {
	s := &enginetest.Engine{}
	var lines []string
	tm := NewSyncTimer(TimerOptions{Name: "decode", Device: "cuda:1", FlagEnv: "MY_TIMER", Sync: s,
		Log: func(l string) { lines = append(lines, l) }, Getenv: vars(map[string]string{"MY_TIMER": "1"})})
	if !tm.Enabled() {
		t.Fatal("MY_TIMER=1 did not enable the timer")
	}
	span := tm.Start()
	time.Sleep(2 * time.Millisecond)
	if d := span.Stop(); d != 2*time.Millisecond {
		t.Errorf("span = %v, want the 2ms slept", d)
	}
	want := errors.New("boom")
	wrapped := tm.Wrap(func() error { return want })
	if err := wrapped(); err != want {
		t.Errorf("wrapped error = %v", err)
	}
	if strings.Join(s.Syncs(), ",") != "cuda:1,cuda:1,cuda:1,cuda:1" {
		t.Errorf("synchronised %v, want cuda:1 before start and stop of both measurements", s.Syncs())
	}
	if len(lines) != 2 || lines[0] != "decode takes 0.0020s" || lines[1] != "decode takes 0.0000s" {
		t.Errorf("log lines = %q", lines)
	}
}

func TestSyncTimerCPUAndErrors(t *testing.T) {
	s := &enginetest.Engine{SyncErr: errors.New("device lost")}
	var lines []string
	tm := NewSyncTimer(TimerOptions{Name: "n", Device: "cpu", Sync: s, Log: func(l string) { lines = append(lines, l) },
		Getenv: vars(map[string]string{EnvSyncTimer: "on"})})
	tm.Start().Stop()
	if len(s.Syncs()) != 0 || len(lines) != 1 {
		t.Errorf("cpu timer synchronised %v, logged %q", s.Syncs(), lines)
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
	s := &enginetest.Engine{}
	if err := dropCaches(s); err != nil {
		t.Fatal(err)
	}
	if strings.Join(order, "") != "ab" {
		t.Errorf("droppers ran in order %v, want name order", order)
	}
	un2()
	order = nil
	s.SyncErr = errors.New("cuda busy")
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
//
// It runs in a synctest bubble, whose clock moves only by the sleep.
func TestSyncTimerSeedBehaviour(t *testing.T) { synctest.Test(t, testSyncTimerSeedBehaviour) }

func testSyncTimerSeedBehaviour(t *testing.T) {
	s := &enginetest.Engine{}
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
	if d := span.Stop(); d != time.Millisecond {
		t.Errorf("span = %v, want the 1ms slept", d)
	}
	if len(lines) != 1 || lines[0] != "vae decode takes 0.0010s" {
		t.Errorf("log = %q, want the seed's \"NAME takes X.XXXXs\"", lines)
	}
	env[EnvSyncTimer] = "0" // and off again
	if d := named.Start().Stop(); d != 0 || len(lines) != 1 {
		t.Errorf("timer measured after the flag was cleared: %v, %q", d, lines)
	}

	env[EnvSyncTimer] = "1"
	lines = nil
	anonymous := NewSyncTimer(TimerOptions{Sync: s, Log: logTo, Getenv: vars(env)})
	span = anonymous.Start()
	time.Sleep(time.Millisecond)
	if d := span.Stop(); d != time.Millisecond || len(lines) != 0 {
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
