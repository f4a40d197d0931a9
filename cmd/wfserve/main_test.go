package main

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/worldfoundry/wfgen/examples/tinymodels"
)

// syncBuffer is a bytes.Buffer safe for the server's and the test's
// goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestServeAndStopOnSIGTERM runs the command on a loopback port with the
// demo manifests, answers an infer request, and stops cleanly (exit 0) on
// SIGTERM.
func TestServeAndStopOnSIGTERM(t *testing.T) {
	dir := t.TempDir()
	if err := tinymodels.Build(dir); err != nil {
		t.Fatal(err)
	}
	manifests := filepath.Join("..", "..", "manifests")
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run([]string{"-addr", "127.0.0.1:0", "-checkpoint-root", dir, "-device", "cpu", "-batch",
			filepath.Join(manifests, "tiny-encoder.yaml"), filepath.Join(manifests, "tiny-world.yaml")}, &bytes.Buffer{}, &stderr)
	}()
	addr := regexp.MustCompile(`msg=serving addr=(\S+)`)
	var url string
	for deadline := time.Now().Add(60 * time.Second); url == ""; {
		if m := addr.FindStringSubmatch(stderr.String()); m != nil {
			url = "http://" + m[1]
		}
		select {
		case code := <-done:
			t.Fatalf("exited %d before serving:\n%s", code, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("not serving after 60 s:\n%s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
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
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d after SIGTERM:\n%s", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("still running 30 s after SIGTERM")
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
