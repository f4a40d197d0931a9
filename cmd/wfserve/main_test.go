package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/worldfoundry/wfgen/examples/tinymodels"
	"github.com/worldfoundry/wfgen/internal/enginetest"
)

// tiny holds the demo families' checkpoints, built once for the package's
// tests (in-process and wfserve processes alike) and removed when they are
// over.
var tiny = enginetest.Checkpoints{Name: "wfserve-test", Build: tinymodels.Build}

// wfserveBin holds the wfserve executable, built once.
var wfserveBin = enginetest.Checkpoints{Name: "wfserve-bin", Build: func(dir string) error {
	if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "wfserve"), ".").CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v\n%s", err, out)
	}
	return nil
}}

func TestMain(m *testing.M) { enginetest.Main(m) }

var servingRecord = regexp.MustCompile(`msg=serving addr=(\S+)`)

// servingURL waits until stderr has the record of the address wfserve
// serves on and returns its URL; exited, polled meanwhile, says how the
// server ended ("" while it runs), which fails the test.
func servingURL(t *testing.T, stderr *enginetest.Buffer, exited func() string) string {
	t.Helper()
	var url string
	enginetest.WaitFor(t, "wfserve to serve", func() bool {
		if m := servingRecord.FindStringSubmatch(stderr.String()); m != nil {
			url = "http://" + m[1]
			return true
		}
		if how := exited(); how != "" {
			t.Fatalf("%s before serving:\n%s", how, stderr.String())
		}
		return false
	})
	return url
}

// runExit is exited for run's exit code on done.
func runExit(done <-chan int) func() string {
	return func() string {
		select {
		case code := <-done:
			return fmt.Sprintf("exited %d", code)
		default:
			return ""
		}
	}
}

// TestServeAndStopOnSIGTERM runs the command on a loopback port with the
// demo manifests, answers an infer request, and stops cleanly (exit 0) on
// SIGTERM.
func TestServeAndStopOnSIGTERM(t *testing.T) {
	dir := tiny.Dir(t)
	manifests := filepath.Join("..", "..", "manifests")
	var stderr enginetest.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run([]string{"-addr", "127.0.0.1:0", "-checkpoint-root", dir, "-device", "cpu", "-batch",
			filepath.Join(manifests, "tiny-encoder.yaml"), filepath.Join(manifests, "tiny-world.yaml")}, &bytes.Buffer{}, &stderr)
	}()
	url := servingURL(t, &stderr, runExit(done))
	resp, err := http.Post(url+"/v2/models/tiny-encoder/infer", "application/json",
		strings.NewReader(`{"inputs":[{"name":"tokens","datatype":"INT64","shape":[3],"data":[1,2,3]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("infer: %d", resp.StatusCode)
	}
	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	if code := enginetest.Receive(t, "wfserve to stop after SIGTERM", done); code != 0 {
		t.Errorf("exit %d after SIGTERM:\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "msg=stopped") {
		t.Errorf("no stop record:\n%s", stderr.String())
	}
}

func TestInvalidManifestsAndUsage(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("model_family_id: 1\n"), 0o644)
	var stderr bytes.Buffer
	if code := run([]string{bad}, &bytes.Buffer{}, &stderr); code != 1 || !strings.Contains(stderr.String(), "bad.yaml:1:1") {
		t.Errorf("invalid manifest: exit %d\n%s", code, stderr.String())
	}
	stderr.Reset()
	if code := run(nil, &bytes.Buffer{}, &stderr); code != 2 || !strings.Contains(stderr.String(), "usage: wfserve") {
		t.Errorf("no arguments: exit %d\n%s", code, stderr.String())
	}
	stderr.Reset()
	if code := run([]string{"-token-file", filepath.Join(t.TempDir(), "missing"), bad}, &bytes.Buffer{}, &stderr); code != 2 {
		t.Errorf("missing token file: exit %d\n%s", code, stderr.String())
	}
}
