// Package benchproc holds what the serving benchmarks (servebench,
// binbench) need to run servers as processes of their own: a free port, a
// readiness wait, a clean stop, the module root, and latency percentiles.
package benchproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/worldfoundry/wfgen/examples/tinymodels"
)

// Percentile returns the p-th percentile of sorted latencies, rounded to
// round, or "-" when there are none.
func Percentile(sorted []time.Duration, p int, round time.Duration) string {
	if len(sorted) == 0 {
		return "-"
	}
	i := (p*len(sorted)+99)/100 - 1
	return sorted[max(i, 0)].Round(round).String()
}

// WaitReady polls url's /v2/health/ready until it answers 200, for at most
// timeout.
func WaitReady(url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/v2/health/ready", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready after %v", timeout)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop ends a server process the program started: SIGTERM, then SIGKILL
// after 10 s.
func Stop(cmd *exec.Cmd) {
	if cmd.Process == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}

// FreePort returns a loopback port nothing listens on now.
func FreePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	_, port, err := net.SplitHostPort(ln.Addr().String())
	return port, err
}

// ModuleRoot finds the folder of go.mod from the working directory up.
func ModuleRoot() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", errors.New("no go.mod above the working directory")
		}
		d = parent
	}
}

// Workspace is a bench command's temporary folder: the demo's tiny
// checkpoints (examples/tinymodels) under Dir, and wfserve built from the
// module at Root as Wfserve.
type Workspace struct {
	Root, Dir, Wfserve string
}

// NewWorkspace makes the workspace of the command name; Close removes it.
func NewWorkspace(name string) (*Workspace, error) {
	root, err := ModuleRoot()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", name)
	if err != nil {
		return nil, err
	}
	w := &Workspace{Root: root, Dir: dir}
	if err := tinymodels.Build(dir); err != nil {
		w.Close()
		return nil, err
	}
	bin := filepath.Join(dir, "wfserve")
	build := exec.Command("go", "build", "-o", bin, "./cmd/wfserve")
	build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		w.Close()
		return nil, fmt.Errorf("building wfserve: %w", err)
	}
	w.Wfserve = bin
	return w, nil
}

// Close removes the workspace's folder.
func (w *Workspace) Close() error { return os.RemoveAll(w.Dir) }

// Serve starts the workspace's wfserve on a free loopback port with the
// checkpoints of the workspace, on the CPU, with threads intra-op threads
// and warnings only in its log, plus args (more flags, then manifests),
// and waits until it is ready. stop stops it.
func (w *Workspace) Serve(threads int, args ...string) (url string, stop func(), err error) {
	port, err := FreePort()
	if err != nil {
		return "", nil, err
	}
	url = "http://127.0.0.1:" + port
	cmd := exec.Command(w.Wfserve, append([]string{"-addr", "127.0.0.1:" + port, "-checkpoint-root", w.Dir, "-device", "cpu"}, args...)...)
	cmd.Env = append(os.Environ(), "WORLDFOUNDRY_TORCH_THREADS="+strconv.Itoa(threads), "WORLDFOUNDRY_TORCH_INTEROP_THREADS=1", "WORLDFOUNDRY_LOG_LEVEL=warn")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	if err := WaitReady(url, 60*time.Second); err != nil {
		Stop(cmd)
		return "", nil, err
	}
	return url, func() { Stop(cmd) }, nil
}
