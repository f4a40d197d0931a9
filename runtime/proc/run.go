// Package proc runs and stops framework-owned worker processes so they stay
// observable and killable: a logged subprocess whose raw output goes to
// files (only a bounded tail is ever held in memory), with the caller's
// correlation fields in its environment and a JSONL lifecycle file beside
// the captures, started in its own process group so a timeout or a
// cancellation terminates every descendant (SIGTERM, grace, SIGKILL). It
// also holds the stand-alone pieces: a bounded log-file tail, process-group
// and process-tree termination, and the CUDA_VISIBLE_DEVICES value for a
// child. torchrun launching lives in the torchrun subpackage.
//
// Everything is pure Go (no cgo). Process discovery uses /proc on Linux;
// docs/processes.md says what other systems get.
package proc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/worldfoundry/wfgen/runtime/logctx"
)

// EnvLifecycle tells a child where its lifecycle JSONL file is, so it (or a
// process it starts) can add events with logctx.AppendEvent.
const EnvLifecycle = "WORLDFOUNDRY_LIFECYCLE_PATH"

// Tail sizes Run keeps in Result when a Command does not say.
const (
	DefaultTailBytes int64 = 64 << 10
	DefaultTailLines       = 200
)

// ErrTimedOut is wrapped by Run's error when the child outlived its Timeout.
var ErrTimedOut = errors.New("timed out")

// Command describes one logged subprocess.
type Command struct {
	// Path is the program to run (looked up in PATH when it has no slash,
	// like exec.Command).
	Path string
	// Args are the arguments after the program name.
	Args []string
	// Dir is the working directory; "" means the caller's.
	Dir string
	// Env is the child's environment; nil means os.Environ(). Run adds the
	// correlation fields of its ctx (logctx.EnvContext) and EnvLifecycle.
	Env []string
	// Stdin is the child's standard input; nil means /dev/null.
	Stdin io.Reader

	// LogDir receives NAME.stdout.log, NAME.stderr.log (truncated at start)
	// and NAME.lifecycle.jsonl (appended to); it is created if missing.
	LogDir string
	// Name prefixes the three files; "" means the base name of Path. It
	// must be a plain file name.
	Name string

	// Timeout bounds the child's run time; 0 means no limit.
	Timeout time.Duration
	// Grace is the wait between SIGTERM and SIGKILL when terminating;
	// 0 means DefaultGrace.
	Grace time.Duration
	// TailBytes and TailLines bound Result.StdoutTail and StderrTail;
	// 0 means DefaultTailBytes and DefaultTailLines.
	TailBytes int64
	TailLines int

	// Stdout and Stderr, when set, also receive the child's output as it is
	// written (through a pipe; the files stay complete). A failing writer
	// is dropped; the capture goes on.
	Stdout, Stderr io.Writer
	// LeaveStragglers keeps processes that are still running in the child's
	// process group after the child itself exits normally. By default they
	// are terminated like on a timeout.
	LeaveStragglers bool
}

// Result is the outcome of Run. It is returned whenever the child started,
// whatever its exit status.
type Result struct {
	// Name is the file prefix used.
	Name string
	// Argv is the program and its arguments.
	Argv []string
	// PID is the child's process id (and its process group id); 0 when it
	// did not start.
	PID int
	// ExitCode is the child's exit status, or -1 when a signal ended it or
	// it did not start.
	ExitCode int
	// Signal names the signal that ended the child ("SIGTERM"), or "".
	Signal string
	// TimedOut and Canceled say why Run terminated the child, if it did.
	TimedOut, Canceled bool
	// Killed says SIGKILL had to be sent after the grace period.
	Killed bool
	// Start and End bracket the child's run.
	Start, End time.Time
	// StdoutPath, StderrPath and LifecyclePath are the run's files.
	StdoutPath, StderrPath, LifecyclePath string
	// StdoutBytes and StderrBytes are the sizes of the captures.
	StdoutBytes, StderrBytes int64
	// StdoutTail and StderrTail are bounded tails of the captures (see Tail).
	StdoutTail, StderrTail string
}

// Duration is how long the child ran.
func (r *Result) Duration() time.Duration { return r.End.Sub(r.Start) }

// Success reports whether the child exited with status 0 on its own.
func (r *Result) Success() bool {
	return r.PID != 0 && r.ExitCode == 0 && r.Signal == "" && !r.TimedOut && !r.Canceled
}

// Run starts c in its own process group (a new session), with stdout and
// stderr written straight to files in c.LogDir, waits for it, and returns
// the Result. The child's environment carries the correlation fields of ctx
// (logctx.AppendEnv) and EnvLifecycle. The lifecycle file gets one event per
// step (started, timed_out or canceled, terminating, killed, stragglers,
// exited, or start_failed; see docs/processes.md for the schema).
//
// A non-zero exit is not an error: check Result.ExitCode and the tails.
// When c.Timeout passes or ctx is done first, the child's whole process
// group and process tree are terminated (SIGTERM, c.Grace, SIGKILL), and the
// error wraps ErrTimedOut or context.Cause(ctx); the Result is still
// returned. Invalid c, a ctx already done, or a failure to create the files
// or start the child is an error (with a nil Result when nothing was
// created, or one with PID 0 once the files exist).
//
// Memory stays bounded however much the child writes: without c.Stdout /
// c.Stderr the child writes to the files directly; with them, Run copies
// through a fixed 256 KiB buffer per stream. Only the tails are read back.
func Run(ctx context.Context, c Command) (*Result, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	name, err := c.check()
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("proc: %s not started: %w", name, context.Cause(ctx))
	}
	grace := c.Grace
	if grace == 0 {
		grace = DefaultGrace
	}
	tailBytes, tailLines := c.TailBytes, c.TailLines
	if tailBytes == 0 {
		tailBytes = DefaultTailBytes
	}
	if tailLines == 0 {
		tailLines = DefaultTailLines
	}
	if err := os.MkdirAll(c.LogDir, 0o755); err != nil {
		return nil, fmt.Errorf("proc: log directory: %w", err)
	}
	res := &Result{
		Name:          name,
		Argv:          append([]string{c.Path}, c.Args...),
		ExitCode:      -1,
		StdoutPath:    filepath.Join(c.LogDir, name+".stdout.log"),
		StderrPath:    filepath.Join(c.LogDir, name+".stderr.log"),
		LifecyclePath: filepath.Join(c.LogDir, name+".lifecycle.jsonl"),
	}
	var lifeErr error
	emit := func(event string, data map[string]any) {
		if err := logctx.AppendEvent(ctx, res.LifecyclePath, event, data); err != nil && lifeErr == nil {
			lifeErr = fmt.Errorf("proc: lifecycle file: %w", err)
		}
	}

	outF, err := os.OpenFile(res.StdoutPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("proc: stdout capture: %w", err)
	}
	defer outF.Close()
	errF, err := os.OpenFile(res.StderrPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("proc: stderr capture: %w", err)
	}
	defer errF.Close()

	env := c.Env
	if env == nil {
		env = os.Environ()
	}
	env = logctx.AppendEnv(env, ctx)
	env = SetEnv(env, EnvLifecycle, res.LifecyclePath)

	cmd := exec.Command(c.Path, c.Args...)
	cmd.Dir = c.Dir
	cmd.Env = env
	cmd.Stdin = c.Stdin
	startInNewGroup(cmd)
	var cp copier
	cmd.Stdout, err = cp.output(outF, c.Stdout)
	if err == nil {
		cmd.Stderr, err = cp.output(errF, c.Stderr)
	}
	if err != nil {
		cp.abort()
		return nil, err
	}

	res.Start = time.Now()
	if err := cmd.Start(); err != nil {
		cp.abort()
		res.End = time.Now()
		emit("start_failed", map[string]any{"argv": res.Argv, "dir": c.Dir, "error": err.Error()})
		return res, errors.Join(fmt.Errorf("proc: start %s: %w", c.Path, err), lifeErr)
	}
	cp.started()
	res.PID = cmd.Process.Pid
	started := map[string]any{
		"child_pid": res.PID, "pgid": res.PID, "argv": res.Argv,
		"stdout": res.StdoutPath, "stderr": res.StderrPath,
	}
	if c.Dir != "" {
		started["dir"] = c.Dir
	}
	if c.Timeout > 0 {
		started["timeout_ms"] = c.Timeout.Milliseconds()
	}
	emit("started", started)

	done := make(chan struct{})
	go func() {
		_ = cmd.Wait() // the exit status is read from cmd.ProcessState
		close(done)
	}()
	var timeoutC <-chan time.Time
	if c.Timeout > 0 {
		t := time.NewTimer(c.Timeout)
		defer t.Stop()
		timeoutC = t.C
	}
	var reason string
	select {
	case <-done:
	case <-timeoutC:
		reason = "timeout"
	case <-ctx.Done():
		reason = "canceled"
	}
	if reason != "" {
		select {
		case <-done: // it exited in the same instant: not our doing
			reason = ""
		default:
		}
	}
	plan := termPlan{
		pgid: res.PID, root: res.PID, grace: grace,
		onTerm: func(pids []int) {
			emit("terminating", map[string]any{"child_pid": res.PID, "signal": "SIGTERM", "pids": pids, "grace_ms": grace.Milliseconds()})
		},
		onKill: func(pids []int) {
			emit("killed", map[string]any{"child_pid": res.PID, "signal": "SIGKILL", "pids": pids})
		},
	}
	var errs []error
	switch reason {
	case "timeout":
		res.TimedOut = true
		emit("timed_out", map[string]any{"child_pid": res.PID, "timeout_ms": c.Timeout.Milliseconds()})
		errs = append(errs, fmt.Errorf("proc: %s (pid %d) %w after %v", name, res.PID, ErrTimedOut, c.Timeout))
	case "canceled":
		res.Canceled = true
		cause := context.Cause(ctx)
		emit("canceled", map[string]any{"child_pid": res.PID, "reason": cause.Error()})
		if cause == ctx.Err() {
			errs = append(errs, fmt.Errorf("proc: %s (pid %d) canceled: %w", name, res.PID, cause))
		} else {
			errs = append(errs, fmt.Errorf("proc: %s (pid %d) canceled: %w: %w", name, res.PID, ctx.Err(), cause))
		}
	}
	if reason != "" {
		term, err := terminate(plan)
		res.Killed = len(term.Killed) > 0
		errs = append(errs, err)
	}
	<-done
	res.End = time.Now()
	if reason == "" && !c.LeaveStragglers && groupHasLive(res.PID) {
		plan.root = 0
		plan.onTerm = func(pids []int) {
			emit("stragglers", map[string]any{"child_pid": res.PID, "signal": "SIGTERM", "pids": pids, "grace_ms": grace.Milliseconds()})
		}
		_, err := terminate(plan)
		errs = append(errs, err)
	}
	errs = append(errs, cp.finish(grace))

	ps := cmd.ProcessState
	res.ExitCode = ps.ExitCode()
	res.Signal = exitSignal(ps)
	if st, err := outF.Stat(); err == nil {
		res.StdoutBytes = st.Size()
	}
	if st, err := errF.Stat(); err == nil {
		res.StderrBytes = st.Size()
	}
	exited := map[string]any{
		"child_pid": res.PID, "duration_ms": float64(res.Duration().Microseconds()) / 1000,
		"stdout_bytes": res.StdoutBytes, "stderr_bytes": res.StderrBytes,
	}
	if res.Signal != "" {
		exited["signal"] = res.Signal
	} else {
		exited["exit_code"] = res.ExitCode
	}
	emit("exited", exited)

	var terr error
	if res.StdoutTail, terr = Tail(res.StdoutPath, tailBytes, tailLines); terr != nil {
		errs = append(errs, terr)
	}
	if res.StderrTail, terr = Tail(res.StderrPath, tailBytes, tailLines); terr != nil {
		errs = append(errs, terr)
	}
	errs = append(errs, lifeErr)
	return res, errors.Join(errs...)
}

// check validates c and returns the file name prefix.
func (c *Command) check() (string, error) {
	if c.Path == "" {
		return "", errors.New("proc: Command.Path is empty")
	}
	if c.LogDir == "" {
		return "", errors.New("proc: Command.LogDir is empty: the captures and the lifecycle file need a run-owned directory")
	}
	name := c.Name
	if name == "" {
		name = filepath.Base(c.Path)
	}
	if name == "." || name == ".." || name == string(filepath.Separator) || strings.ContainsAny(name, `/\`) || strings.ContainsRune(name, 0) {
		return "", fmt.Errorf("proc: Command.Name %q must be a plain file name", name)
	}
	if c.Timeout < 0 || c.Grace < 0 || c.TailBytes < 0 || c.TailLines < 0 {
		return "", fmt.Errorf("proc: Command: negative Timeout (%v), Grace (%v), TailBytes (%d) or TailLines (%d)", c.Timeout, c.Grace, c.TailBytes, c.TailLines)
	}
	return name, nil
}

// copier manages the pipes used when output is also teed to a writer.
type copier struct {
	wg      sync.WaitGroup
	readers []*os.File
	writers []*os.File // the child's ends, closed in the parent after Start
	mu      sync.Mutex
	err     error
}

// output returns what the child should write to: the capture file itself,
// or a pipe whose contents are copied to the file and to tee.
func (cp *copier) output(file *os.File, tee io.Writer) (io.Writer, error) {
	if tee == nil {
		return file, nil
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("proc: pipe: %w", err)
	}
	cp.readers = append(cp.readers, pr)
	cp.writers = append(cp.writers, pw)
	cp.wg.Go(func() {
		buf := make([]byte, 256<<10)
		_, err := io.CopyBuffer(&teeWriter{file: file, tee: tee}, pr, buf)
		if err != nil && !errors.Is(err, os.ErrClosed) {
			cp.mu.Lock()
			cp.err = errors.Join(cp.err, fmt.Errorf("proc: capture %s: %w", file.Name(), err))
			cp.mu.Unlock()
		}
	})
	return pw, nil
}

// started closes the parent's copies of the child's pipe ends.
func (cp *copier) started() {
	for _, w := range cp.writers {
		w.Close()
	}
}

// abort tears the pipes down when the child did not start.
func (cp *copier) abort() {
	cp.started()
	cp.wg.Wait()
	for _, r := range cp.readers {
		r.Close()
	}
}

// finish waits for the copies to drain. A process that escaped termination
// and still holds a pipe open gets grace, then the pipe is closed.
func (cp *copier) finish(grace time.Duration) error {
	drained := make(chan struct{})
	go func() {
		cp.wg.Wait()
		close(drained)
	}()
	select {
	case <-drained:
	case <-time.After(grace):
		for _, r := range cp.readers {
			r.Close()
		}
		<-drained
	}
	for _, r := range cp.readers {
		r.Close()
	}
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.err
}

// teeWriter writes to the capture file and, until it fails, to tee.
type teeWriter struct {
	file *os.File
	tee  io.Writer
	dead bool
}

func (w *teeWriter) Write(p []byte) (int, error) {
	n, err := w.file.Write(p)
	if err != nil {
		return n, err
	}
	if !w.dead {
		if _, err := w.tee.Write(p); err != nil {
			w.dead = true
		}
	}
	return n, nil
}
