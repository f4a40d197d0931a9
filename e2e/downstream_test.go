//go:build cgo

package e2e_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/worldfoundry/wfgen/examples/tinymodels"
	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/tensor"
	"github.com/worldfoundry/wfgen/runtime/torch"
)

// callProgram is the downstream user's program: the generated package's
// Client over a remote backend (README, docs/serving.md#remote-clients),
// one call, the output printed as JSON.
const callProgram = `package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"example.com/downstream/models/tinyencoder"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/remote"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

func main() {
	enc, err := client.Open[tinyencoder.Client](remote.New(tinyencoder.Spec(), os.Args[1]))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer enc.Close()
	p := tinyencoder.DefaultForwardParams()
	p.Tokens = tensor.FromInt64([]int64{3, 1, 4, 1, 5, 9}, 6)
	res, err := enc.Forward(context.Background(), p)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	v, err := res.Output.Float32s()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	json.NewEncoder(os.Stdout).Encode(v)
}
`

// TestDownstreamPathFromEmptyModule is issue 44's downstream path, as the
// README's "Using it from another repository" gives it: an empty module
// (go mod init) gets wfgen as a tool (what go get -tool writes; the module
// proxy does not serve this checkout, so a replace stands in for it), then
// wfserve as a tool with go mod edit -tool and go mod tidy; "go tool wfgen
// import" writes a manifest skeleton from a TorchScript checkpoint, "go
// tool wfgen generate" its package, "go tool wfserve" serves it on
// loopback, and a program using the generated Client over remote.New
// gets the answer a direct engine call gives, bit for bit.
func TestDownstreamPathFromEmptyModule(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds wfgen, wfserve and a program in a fresh module; skipped with -short")
	}
	root := repoRoot(t)
	dir := t.TempDir()
	env := []string{"GOWORK=off"}
	if os.Getenv("GOPROXY") == "off" {
		// Offline (the libtorch 2.x lane): see TestGoToolImportInFreshModule.
		env = append(env, "GOSUMDB=off")
	}
	gocmd := func(args ...string) string {
		t.Helper()
		out, err := runEnv(dir, env, "go", args...)
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}

	gocmd("mod", "init", "example.com/downstream")
	// What go get -tool github.com/worldfoundry/wfgen/cmd/wfgen writes,
	// with the replace a published version makes unnecessary.
	gocmd("mod", "edit", "-require=github.com/worldfoundry/wfgen@v0.0.0", "-replace=github.com/worldfoundry/wfgen="+root,
		"-tool=github.com/worldfoundry/wfgen/cmd/wfgen")
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644))
	gocmd("mod", "tidy")
	// The README's two commands for wfserve.
	gocmd("mod", "edit", "-tool=github.com/worldfoundry/wfgen/cmd/wfserve")
	gocmd("mod", "tidy")

	ckpt := filepath.Join(dir, "checkpoints", "tiny-encoder.pt")
	must(t, tinymodels.BuildEncoder(ckpt))
	gocmd("tool", "wfgen", "import", "-o", filepath.Join("manifests", "tiny-encoder.yaml"), filepath.Join("checkpoints", "tiny-encoder.pt"))
	gocmd("tool", "wfgen", "validate", "manifests")
	gocmd("tool", "wfgen", "generate", "-o", "models", "manifests")
	must(t, os.MkdirAll(filepath.Join(dir, "cmd", "call"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "cmd", "call", "main.go"), []byte(callProgram), 0o644))
	gocmd("mod", "tidy") // the generated package and the program's imports
	gocmd("vet", "./...")
	// Built here, so that the wait for the server below is its start alone
	// (go tool caches the binary).
	gocmd("tool", "wfserve", "-h")

	addrFile := filepath.Join(t.TempDir(), "addr.json")
	srv := exec.Command("go", "tool", "wfserve", "-addr", "127.0.0.1:0", "-addr-file", addrFile, "-device", "cpu", "manifests")
	srv.Dir = dir
	srv.Env = append(append(os.Environ(), "GOFLAGS=-mod=mod"), env...)
	srv.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // go and wfserve: one group to stop
	stderr := &enginetest.Buffer{}
	srv.Stdout, srv.Stderr = stderr, stderr
	must(t, srv.Start())
	exited := make(chan struct{})
	var exitErr error
	go func() { exitErr = srv.Wait(); close(exited) }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			syscall.Kill(-srv.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	})
	var l struct {
		Addr string `json:"addr"`
	}
	enginetest.WaitFor(t, "go tool wfserve to write its -addr-file", func() bool {
		select {
		case <-exited:
			t.Fatalf("go tool wfserve exited (%v) before serving:\n%s", exitErr, stderr.String())
		default:
		}
		b, err := os.ReadFile(addrFile)
		return err == nil && json.Unmarshal(b, &l) == nil
	})

	out := gocmd("run", "./cmd/call", "http://"+l.Addr)
	var got []float32
	if err := json.Unmarshal([]byte(out[strings.Index(out, "["):]), &got); err != nil {
		t.Fatalf("program output %q: %v", out, err)
	}

	// The same call straight to the engine: a request the server runs
	// alone (no -batch) gives the in-process bits.
	mod, err := torch.Default().Load(ckpt, engine.LoadOptions{Device: "cpu"})
	must(t, err)
	defer mod.Close()
	o, err := mod.Call(context.Background(), "forward", map[string]any{
		"tokens": tensor.FromInt64([]int64{3, 1, 4, 1, 5, 9}, 6), "normalize": true}, engine.CallOptions{})
	must(t, err)
	want, err := o.(*tensor.Tensor).Float32s()
	must(t, err)
	if len(got) != len(want) {
		t.Fatalf("remote answer has %d values, the engine's %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("value %d: remote %v, engine %v", i, got[i], want[i])
		}
	}

	// A clean stop: SIGTERM reaches wfserve through the group; it drains
	// and exits 0, and so does go tool.
	must(t, syscall.Kill(-srv.Process.Pid, syscall.SIGTERM))
	enginetest.WaitFor(t, "go tool wfserve to exit after SIGTERM", func() bool {
		select {
		case <-exited:
			return true
		default:
			return false
		}
	})
	stopped = true
	if exitErr != nil {
		t.Errorf("go tool wfserve after SIGTERM: %v\n%s", exitErr, stderr.String())
	}
}
