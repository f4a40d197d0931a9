//go:build linux

package proc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/logctx"
)

// selfCommand returns a Command that runs this test binary in role.
func selfCommand(t *testing.T, role string, extraEnv ...string) Command {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Command{
		Path:   exe,
		Env:    append(append(os.Environ(), roleEnv+"="+role), extraEnv...),
		LogDir: t.TempDir(),
		Name:   role,
	}
}

type reported struct {
	role  string
	pid   int
	start uint64
}

// readReports parses the helpers' report file.
func readReports(t *testing.T, path string) []reported {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []reported
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		pid, _ := strconv.Atoi(f[1])
		start, _ := strconv.ParseUint(f[2], 10, 64)
		out = append(out, reported{f[0], pid, start})
	}
	return out
}

// waitReports polls until n helpers have reported.
func waitReports(t *testing.T, path string, n int) []reported {
	t.Helper()
	var r []reported
	enginetest.WaitFor(t, fmt.Sprintf("%d helpers to report", n), func() bool {
		r = readReports(t, path)
		return len(r) >= n
	})
	return r
}

// isAlive checks /proc: the process exists, is the same one (start time)
// and is not a zombie.
func isAlive(r reported) bool {
	p, ok := readProc(r.pid)
	return ok && p.live() && p.start == r.start
}

// cleanup kills whatever of reps is still alive when the test ends.
func cleanup(t *testing.T, path *string) {
	t.Cleanup(func() {
		for _, r := range readReports(t, *path) {
			if isAlive(r) {
				syscall.Kill(r.pid, syscall.SIGKILL)
			}
		}
	})
}

func events(t *testing.T, path string) []logctx.Event {
	t.Helper()
	evs, err := logctx.ReadEvents(path)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func eventNames(evs []logctx.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Event)
	}
	return out
}

func findEvent(t *testing.T, evs []logctx.Event, name string) logctx.Event {
	t.Helper()
	for _, e := range evs {
		if e.Event == name {
			return e
		}
	}
	t.Fatalf("no %q event in %v", name, eventNames(evs))
	return logctx.Event{}
}

func TestRunNonZeroExitIsAResult(t *testing.T) {
	c := selfCommand(t, "exit", codeEnv+"=3")
	ctx := logctx.With(context.Background(), logctx.Fields{"run_id": "run-exit"})
	res, err := Run(ctx, c)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.ExitCode != 3 || res.Signal != "" || res.Success() || res.TimedOut || res.PID == 0 {
		t.Fatalf("result = %+v", res)
	}
	if res.StdoutTail != "hello\nfrom stdout" || res.StderrTail != "oops" {
		t.Errorf("tails = %q / %q", res.StdoutTail, res.StderrTail)
	}
	if res.StdoutBytes != int64(len("hello\nfrom stdout\n")) {
		t.Errorf("StdoutBytes = %d", res.StdoutBytes)
	}
	if filepath.Dir(res.StdoutPath) != c.LogDir || filepath.Base(res.LifecyclePath) != "exit.lifecycle.jsonl" {
		t.Errorf("paths: %s %s", res.StdoutPath, res.LifecyclePath)
	}
	evs := events(t, res.LifecyclePath)
	// The child runs concurrently with the parent's "started" append, so its
	// own note may come first; "exited" is always last.
	got := eventNames(evs)
	sorted := slices.Sorted(slices.Values(got))
	if !slices.Equal(sorted, []string{"child_note", "exited", "started"}) || got[len(got)-1] != "exited" {
		t.Fatalf("events = %v", got)
	}
	started, note, exited := findEvent(t, evs, "started"), findEvent(t, evs, "child_note"), evs[2]
	if started.Data["child_pid"] != int64(res.PID) || started.Context["run_id"] != "run-exit" || started.PID != os.Getpid() {
		t.Errorf("started = %+v", started)
	}
	if note.PID != res.PID || note.Context["run_id"] != "run-exit" || note.Context["step"] != "child" {
		t.Errorf("child's own event = %+v", note)
	}
	if exited.Data["exit_code"] != int64(3) || exited.Data["signal"] != nil {
		t.Errorf("exited = %+v", exited)
	}

	c.Env = append(c.Env, codeEnv+"=0")
	if res, err := Run(context.Background(), c); err != nil || !res.Success() {
		t.Fatalf("exit 0: %+v, %v", res, err)
	}
	if n := len(events(t, res.LifecyclePath)); n != 6 {
		t.Errorf("second run should append to the lifecycle file: %d events", n)
	}
}

// TestRunTimeoutKillsEveryDescendant: the child starts grandchildren (one
// ignores SIGTERM, one leaves the group with setsid and has a child of its
// own) and sleeps; after the timeout none of them is alive.
func TestRunTimeoutKillsEveryDescendant(t *testing.T) {
	t.Parallel()
	reportPath := filepath.Join(t.TempDir(), "report")
	cleanup(t, &reportPath)
	c := selfCommand(t, "tree", reportEnv+"="+reportPath)
	c.Timeout = 3 * time.Second
	c.Grace = 300 * time.Millisecond
	type out struct {
		res *Result
		err error
	}
	done := make(chan out, 1)
	go func() {
		res, err := Run(context.Background(), c)
		done <- out{res, err}
	}()
	reps := waitReports(t, reportPath, 5) // tree, sleeper, stubborn, escaper, escaper's sleeper
	for _, r := range reps {
		if !isAlive(r) {
			t.Fatalf("%s (pid %d) died before the timeout", r.role, r.pid)
		}
	}
	o := <-done
	if !errors.Is(o.err, ErrTimedOut) {
		t.Fatalf("Run error = %v; want ErrTimedOut", o.err)
	}
	res := o.res
	for _, r := range reps {
		if isAlive(r) {
			t.Errorf("%s (pid %d) is still alive after the timeout", r.role, r.pid)
		}
	}
	if !res.TimedOut || !res.Killed || res.Signal == "" || res.ExitCode != -1 {
		t.Errorf("result = %+v", res)
	}
	evs := events(t, res.LifecyclePath)
	if got := eventNames(evs); !slices.Equal(got, []string{"started", "timed_out", "terminating", "killed", "exited"}) {
		t.Fatalf("events = %v", got)
	}
	if evs[1].Data["timeout_ms"] != int64(3000) {
		t.Errorf("timed_out = %+v", evs[1])
	}
	termPIDs := pidSet(evs[2].Data["pids"])
	for _, r := range reps {
		if !termPIDs[int64(r.pid)] {
			t.Errorf("%s (pid %d) missing from the terminating event %v", r.role, r.pid, evs[2].Data["pids"])
		}
	}
	var stubborn reported
	for _, r := range reps {
		if r.role == "stubborn" {
			stubborn = r
		}
	}
	if !pidSet(evs[3].Data["pids"])[int64(stubborn.pid)] {
		t.Errorf("killed event %v lacks the SIGTERM-ignoring grandchild %d", evs[3].Data, stubborn.pid)
	}
	if sig := evs[4].Data["signal"]; sig != "SIGTERM" {
		t.Errorf("exited = %+v; want the child ended by SIGTERM", evs[4].Data)
	}
	if res.StdoutTail != "ready" {
		t.Errorf("stdout tail = %q", res.StdoutTail)
	}
}

func pidSet(v any) map[int64]bool {
	out := map[int64]bool{}
	list, _ := v.([]any)
	for _, x := range list {
		if n, ok := x.(int64); ok {
			out[n] = true
		}
	}
	return out
}

func TestRunContextCancelTerminatesGroup(t *testing.T) {
	t.Parallel()
	reportPath := filepath.Join(t.TempDir(), "report")
	cleanup(t, &reportPath)
	c := selfCommand(t, "tree", reportEnv+"="+reportPath, escapeEnv+"=0")
	c.Grace = 200 * time.Millisecond
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() {
		waitReports(t, reportPath, 3)
		cancel(errors.New("operator pressed stop"))
	}()
	res, err := Run(ctx, c)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "operator pressed stop") {
		t.Fatalf("Run error = %v", err)
	}
	for _, r := range readReports(t, reportPath) {
		if isAlive(r) {
			t.Errorf("%s (pid %d) survived the cancellation", r.role, r.pid)
		}
	}
	evs := events(t, res.LifecyclePath)
	if e := findEvent(t, evs, "canceled"); e.Data["reason"] != "operator pressed stop" {
		t.Errorf("canceled = %+v", e)
	}
	if !res.Canceled || res.TimedOut {
		t.Errorf("result = %+v", res)
	}
}

func TestRunTerminatesStragglers(t *testing.T) {
	t.Parallel()
	for _, leave := range []bool{false, true} {
		t.Run(fmt.Sprintf("leave=%v", leave), func(t *testing.T) {
			reportPath := filepath.Join(t.TempDir(), "report")
			cleanup(t, &reportPath)
			c := selfCommand(t, "daemonize", reportEnv+"="+reportPath)
			c.Grace = 200 * time.Millisecond
			c.LeaveStragglers = leave
			res, err := Run(context.Background(), c)
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("Run = %+v, %v", res, err)
			}
			reps := waitReports(t, reportPath, 2)
			var sleeper reported
			for _, r := range reps {
				if r.role == "sleeper" {
					sleeper = r
				}
			}
			evs := events(t, res.LifecyclePath)
			if leave {
				if !isAlive(sleeper) {
					t.Fatal("straggler was terminated despite LeaveStragglers")
				}
				if _, err := TerminateGroup(res.PID, time.Second); err != nil {
					t.Fatal(err)
				}
				if isAlive(sleeper) {
					t.Fatal("TerminateGroup left the straggler alive")
				}
				return
			}
			if isAlive(sleeper) {
				t.Fatal("straggler outlived the run")
			}
			if got := eventNames(evs); !slices.Equal(got, []string{"started", "stragglers", "exited"}) {
				t.Fatalf("events = %v", got)
			}
			if e := evs[1]; !pidSet(e.Data["pids"])[int64(sleeper.pid)] {
				t.Errorf("stragglers event %+v lacks pid %d", e.Data, sleeper.pid)
			}
		})
	}
}

// BenchmarkRun measures the cost of one logged subprocess (/bin/true: files,
// lifecycle events, tails) next to a bare exec.Cmd.
func BenchmarkRun(b *testing.B) {
	truePath := "/bin/true"
	if _, err := os.Stat(truePath); err != nil {
		b.Skip("no /bin/true")
	}
	b.Run("proc.Run", func(b *testing.B) {
		c := Command{Path: truePath, LogDir: b.TempDir()}
		for b.Loop() {
			if res, err := Run(context.Background(), c); err != nil || !res.Success() {
				b.Fatal(res, err)
			}
		}
	})
	b.Run("exec.Cmd", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command(truePath).Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
