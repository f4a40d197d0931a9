package torchrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/worldfoundry/wfgen/runtime/proc"
)

// DefaultCaptureLimit is how many bytes of each stream RunCaptured keeps.
const DefaultCaptureLimit = 32 << 20

// Completed is the outcome of RunCaptured, the seed's
// subprocess.CompletedProcess: the command, its exit status and its output.
type Completed struct {
	// Args is the launch's argv.
	Args []string
	// ReturnCode is the launcher's exit status, or -1 when a signal ended it
	// (Signal names it; the seed gives the negative signal number).
	ReturnCode int
	// Signal names the signal that ended the launcher ("SIGKILL"), or "".
	Signal string
	// Stdout and Stderr are what the launcher wrote, which includes its
	// workers' output unless Launch.Redirects sends it to files.
	Stdout, Stderr string
	// StdoutTruncated and StderrTruncated say the stream was longer than
	// the capture limit: only its last DefaultCaptureLimit bytes are kept.
	StdoutTruncated, StderrTruncated bool
}

// RunCaptured runs l and returns its output in memory (the seed's
// run_torchrun_module, which uses subprocess.run with capture_output=True
// and check=False): a job that fails is not an error — check ReturnCode
// and the output. env is the launcher's whole environment; nil means
// os.Environ().
//
// It is Run with the captures in a temporary folder that is read back and
// removed, so the launcher still gets its own process group, and
// cancelling ctx terminates it and its workers (the error then wraps the
// context's cause, and Completed is still returned). Unlike the seed,
// memory is bounded: each stream keeps at most DefaultCaptureLimit bytes,
// its end. The whole output is on disk while the job runs. For long jobs
// use Run with a LogDir, as the seed advises run_logged_subprocess.
func RunCaptured(ctx context.Context, l Launch, env []string) (*Completed, error) {
	return runCaptured(ctx, l, env, DefaultCaptureLimit)
}

func runCaptured(ctx context.Context, l Launch, env []string, limit int64) (*Completed, error) {
	if _, err := l.Command(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "wfgen-torchrun-*")
	if err != nil {
		return nil, fmt.Errorf("torchrun: capture folder: %w", err)
	}
	defer os.RemoveAll(dir)
	res, runErr := Run(ctx, l, proc.Command{LogDir: dir, Env: env})
	if res == nil {
		return nil, runErr
	}
	c := &Completed{Args: res.Argv, ReturnCode: res.ExitCode, Signal: res.Signal}
	var outErr, errErr error
	c.Stdout, c.StdoutTruncated, outErr = readEnd(res.StdoutPath, limit)
	c.Stderr, c.StderrTruncated, errErr = readEnd(res.StderrPath, limit)
	return c, errors.Join(runErr, outErr, errErr)
}

// readEnd reads the file at path, or only its last limit bytes when it is
// longer (truncated is then true). A missing file (the launcher did not
// start) reads as "".
func readEnd(path string, limit int64) (text string, truncated bool, err error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("torchrun: capture: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", false, fmt.Errorf("torchrun: capture: %w", err)
	}
	off := max(st.Size()-limit, 0)
	b, err := io.ReadAll(io.NewSectionReader(f, off, st.Size()-off))
	if err != nil {
		return "", false, fmt.Errorf("torchrun: capture: %w", err)
	}
	return string(b), off > 0, nil
}
