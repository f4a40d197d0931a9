// Package benchproc holds what the serving benchmarks (servebench,
// binbench, rtbench) need to run servers as processes of their own: ports
// the kernel picks, a readiness wait, a clean stop, the module root, and
// latency percentiles.
package benchproc

import (
	"context"
	"encoding/json"
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

// Listener binds a loopback port for a server the program starts that
// can take a listening socket (the Python peer: uvicorn's sockets), and
// returns it as the file to pass in exec.Cmd.ExtraFiles and the server's
// URL. Bound before the child starts, the port cannot be taken meanwhile
// as a port picked and closed can. The socket is plain TCP: Go listens
// with Multipath TCP by default, and a server that sees protocol 262 where
// it expects TCP's 6 may skip its TCP options (asyncio then leaves Nagle's
// algorithm on, and every answer waits for a delayed ACK: 40 ms).
func Listener() (*os.File, string, error) {
	var lc net.ListenConfig
	lc.SetMultipathTCP(false)
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	defer ln.Close() // the file is a copy
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		return nil, "", err
	}
	return f, "http://" + ln.Addr().String(), nil
}

// Wfserve is a wfserve process the program started.
type Wfserve struct {
	Cmd      *exec.Cmd
	URL      string // its REST API
	GRPCAddr string // its gRPC address, when args had -grpc-addr
}

// StartWfserve starts the wfserve at bin with env added to the
// environment, stderr to this process's, and args (flags, then
// manifests; "-grpc-addr", "127.0.0.1:0" for gRPC), on loopback ports the
// kernel picks, which it reads from wfserve's -addr-file; it returns once
// wfserve is ready.
func StartWfserve(bin string, env []string, args ...string) (*Wfserve, error) {
	dir, err := os.MkdirTemp("", "wfserve-addr")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	addrFile := filepath.Join(dir, "addr.json")
	cmd := exec.Command(bin, append([]string{"-addr", "127.0.0.1:0", "-addr-file", addrFile}, args...)...)
	cmd.Env, cmd.Stderr = append(os.Environ(), env...), os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	w := &Wfserve{Cmd: cmd}
	var addrs struct {
		Addr     string `json:"addr"`
		GRPCAddr string `json:"grpc_addr"`
	}
	for deadline := time.Now().Add(60 * time.Second); ; {
		b, err := os.ReadFile(addrFile)
		if err == nil && json.Unmarshal(b, &addrs) == nil {
			break
		}
		select {
		case <-exited:
			return nil, fmt.Errorf("wfserve exited before serving (%v)", cmd.ProcessState)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			Stop(cmd)
			return nil, errors.New("wfserve wrote no -addr-file within 60 s")
		}
	}
	w.URL, w.GRPCAddr = "http://"+addrs.Addr, addrs.GRPCAddr
	if err := WaitReady(w.URL, 60*time.Second); err != nil {
		Stop(cmd)
		return nil, err
	}
	return w, nil
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

// Serve starts the workspace's wfserve on a loopback port the kernel
// picks, with the checkpoints of the workspace, on the CPU, with threads
// intra-op threads and warnings only in its log, plus args (more flags,
// then manifests), and waits until it is ready. stop stops it.
func (w *Workspace) Serve(threads int, args ...string) (srv *Wfserve, stop func(), err error) {
	env := []string{"WORLDFOUNDRY_TORCH_THREADS=" + strconv.Itoa(threads), "WORLDFOUNDRY_TORCH_INTEROP_THREADS=1", "WORLDFOUNDRY_LOG_LEVEL=warn"}
	srv, err = StartWfserve(w.Wfserve, env, append([]string{"-checkpoint-root", w.Dir, "-device", "cpu"}, args...)...)
	if err != nil {
		return nil, nil, err
	}
	return srv, func() { Stop(srv.Cmd) }, nil
}
