package torchrun

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/logctx"
)

// standIn writes an executable shell script that stands in for the Python
// interpreter of a launch and returns its path.
func standIn(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "python")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// capturesLeft lists what RunCaptured left in the temporary folder.
func capturesLeft(t *testing.T, tmp string) []string {
	t.Helper()
	left, err := filepath.Glob(filepath.Join(tmp, "wfgen-torchrun-*"))
	if err != nil {
		t.Fatal(err)
	}
	return left
}

// TestRunCapturedFailedJob checks the seed's run_torchrun_module contract:
// the output comes back in memory and a failed job is a result, not an
// error (check=False).
func TestRunCapturedFailedJob(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	py := standIn(t, `echo "argv: $*"; echo "worker 1 failed: ChildFailedError" >&2; exit 3`)
	l := Launch{Python: py, NProcPerNode: 2, Module: "pkg.worker", Args: []string{"--steps", "3"}}
	c, err := RunCaptured(context.Background(), l, nil)
	if err != nil {
		t.Fatalf("RunCaptured error on a failed job: %v", err)
	}
	want, _ := l.Command()
	if c.ReturnCode != 3 || c.Signal != "" || !slices.Equal(c.Args, want) {
		t.Errorf("completed = %+v; want exit 3 and args %v", c, want)
	}
	if c.Stdout != "argv: "+strings.Join(want[1:], " ")+"\n" || c.Stderr != "worker 1 failed: ChildFailedError\n" {
		t.Errorf("stdout %q, stderr %q", c.Stdout, c.Stderr)
	}
	if c.StdoutTruncated || c.StderrTruncated {
		t.Error("short output reported truncated")
	}
	if left := capturesLeft(t, tmp); len(left) != 0 {
		t.Errorf("capture folders left behind: %v", left)
	}
}

// TestRunCapturedKeepsTheEnd checks the memory bound: a stream longer than
// the limit keeps its last limit bytes and says it was truncated.
func TestRunCapturedKeepsTheEnd(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	// 5000 numbered lines of 8 bytes each on stdout: 40000 bytes.
	py := standIn(t, `i=0; while [ $i -lt 5000 ]; do printf '%07d\n' $i; i=$((i+1)); done; echo done >&2`)
	c, err := runCaptured(context.Background(), Launch{Python: py, NProcPerNode: 1, Module: "w"}, nil, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if !c.StdoutTruncated || len(c.Stdout) != 4096 || !strings.HasSuffix(c.Stdout, "0004998\n0004999\n") {
		t.Errorf("stdout: truncated %v, %d bytes, ends %q", c.StdoutTruncated, len(c.Stdout), c.Stdout[max(0, len(c.Stdout)-24):])
	}
	if c.StderrTruncated || c.Stderr != "done\n" {
		t.Errorf("stderr: truncated %v, %q", c.StderrTruncated, c.Stderr)
	}
}

// TestRunCapturedCancel checks that cancelling terminates the launcher's
// group and still returns what it wrote, with the context's error. The
// stand-in tells the test through a FIFO that it has written and is about
// to sleep; the test cancels then. A child left running would end by
// itself after 30 s, not by SIGTERM, which the result shows.
func TestRunCapturedCancel(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	fifo := filepath.Join(t.TempDir(), "ready")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	py := standIn(t, `echo started; echo ready > '`+fifo+`'; exec sleep 30`)
	// The bound only a hang reaches makes a stand-in that never gets
	// ready fail with DeadlineExceeded instead of hanging.
	ctx, stop := context.WithTimeout(context.Background(), enginetest.Patience)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		os.ReadFile(fifo) // returns once the stand-in has written to it
		cancel()
	}()
	c, err := RunCaptured(ctx, Launch{Python: py, NProcPerNode: 1, Module: "w"}, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error = %v, want the cancellation", err)
	}
	if c == nil || c.Stdout != "started\n" || c.Signal != "SIGTERM" || c.ReturnCode != -1 {
		t.Errorf("completed = %+v", c)
	}
	if left := capturesLeft(t, tmp); len(left) != 0 {
		t.Errorf("capture folders left behind: %v", left)
	}
}

// TestRunCapturedEnvironment checks the launcher's environment: env as
// given (the caller's own variables are not added to it) plus the
// correlation fields of ctx in WORLDFOUNDRY_LOG_CONTEXT and the lifecycle
// file in WORLDFOUNDRY_LIFECYCLE_PATH, which the seed's run_torchrun_module
// does not pass (docs/differences.md).
func TestRunCapturedEnvironment(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	t.Setenv("WFGEN_NOT_PASSED", "1")
	py := standIn(t, `printf 'context=%s\nlifecycle=%s\nmine=%s\nnot_passed=%s\n' "$WORLDFOUNDRY_LOG_CONTEXT" "$WORLDFOUNDRY_LIFECYCLE_PATH" "$MY_VAR" "$WFGEN_NOT_PASSED"`)
	ctx := logctx.With(context.Background(), logctx.Fields{"run_id": "job-9", "rank": 0})
	c, err := RunCaptured(ctx, Launch{Python: py, NProcPerNode: 1, Module: "w"}, []string{"MY_VAR=mine"})
	if err != nil || c.ReturnCode != 0 {
		t.Fatalf("%+v, %v", c, err)
	}
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(c.Stdout), "\n") {
		k, v, _ := strings.Cut(l, "=")
		got[k] = v
	}
	if got["context"] != `{"rank":0,"run_id":"job-9"}` {
		t.Errorf("WORLDFOUNDRY_LOG_CONTEXT = %q", got["context"])
	}
	if !strings.HasSuffix(got["lifecycle"], ".lifecycle.jsonl") {
		t.Errorf("WORLDFOUNDRY_LIFECYCLE_PATH = %q", got["lifecycle"])
	}
	if got["mine"] != "mine" || got["not_passed"] != "" {
		t.Errorf("env: MY_VAR %q, WFGEN_NOT_PASSED %q; want the given env only", got["mine"], got["not_passed"])
	}
}

func TestRunCapturedBadLaunch(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	if c, err := RunCaptured(context.Background(), Launch{NProcPerNode: 0, Module: "w"}, nil); err == nil || c != nil {
		t.Errorf("invalid launch = %+v, %v", c, err)
	}
	if c, err := RunCaptured(context.Background(), Launch{Python: filepath.Join(tmp, "missing"), NProcPerNode: 1, Module: "w"}, nil); err == nil || c == nil || c.ReturnCode != -1 {
		t.Errorf("missing interpreter = %+v, %v", c, err)
	}
	if left := capturesLeft(t, tmp); len(left) != 0 {
		t.Errorf("capture folders left behind: %v", left)
	}
}

// TestRunCapturedPythonWorkers runs a real two-worker job under Debian's
// torch and reads both workers' reports from the in-memory stdout.
func TestRunCapturedPythonWorkers(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("skipping in -short: a real torchrun job (TestTorchrunPythonWorkers runs the same job through Run)")
	}
	requireTorch(t)
	dir, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	l := Launch{Python: debianPython, NProcPerNode: 2, Module: "allreduce_worker"}
	debianLaunch(&l, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := RunCaptured(ctx, l, loopbackEnv("PYTHONPATH="+dir))
	if err != nil || c.ReturnCode != 0 {
		t.Fatalf("torchrun: %v (exit %+v)\nstdout:\n%s\nstderr:\n%s", err, c, c.Stdout, c.Stderr)
	}
	if n := strings.Count(c.Stdout, `"worker": "python"`); n != 2 || strings.Count(c.Stdout, `"sum": 3.0`) != 2 {
		t.Errorf("stdout has %d worker reports, want 2 with sum 3:\n%s", n, c.Stdout)
	}
}
