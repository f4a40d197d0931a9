package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/worldfoundry/wfgen/internal/enginetest"
)

// wfgenWithin runs the CLI in-process and fails the test when it does not
// return within a few seconds (a blocking open of a named pipe never does).
func wfgenWithin(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	type result struct {
		code     int
		out, err string
	}
	done := make(chan result, 1)
	go func() {
		c, o, e := wfgenRun(args...)
		done <- result{c, o, e}
	}()
	r := enginetest.Receive(t, fmt.Sprintf("wfgen %v (blocked?)", args), done)
	return r.code, r.out, r.err
}

// A named pipe (or a link to one) among the manifests hangs nothing:
// validate, generate, docs and breaking skip it in folders with a warning,
// and refuse it given explicitly (exit 2).
func TestNamedPipes(t *testing.T) {
	tmp := t.TempDir()
	t.Chdir(tmp)
	t.Setenv("WFGEN_CACHE", "off")
	goMod(t)
	copyManifest(t, "kinds/input/kinds.yaml", "m")
	if err := syscall.Mkfifo(filepath.Join("m", "pipe.yaml"), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	if err := os.Symlink("pipe.yaml", filepath.Join("m", "link.json")); err != nil {
		t.Fatal(err)
	}
	const warn = "warning: skipped m/link.json is not a regular file (it is a named pipe)"
	for _, args := range [][]string{
		{"validate", "m"},
		{"generate", "-o", "out", "m"},
		{"docs", "-o", "docs", "m"},
		{"breaking", "--against", "path:m", "m"},
	} {
		code, out, errs := wfgenWithin(t, args...)
		if code != 0 || !strings.Contains(errs, warn) || !strings.Contains(errs, "skipped m/pipe.yaml is not a regular file") {
			t.Errorf("wfgen %v: exit %d\n%s%s", args, code, out, errs)
		}
	}
	for _, p := range []string{filepath.Join("m", "pipe.yaml"), filepath.Join("m", "link.json")} {
		for _, args := range [][]string{
			{"validate", p},
			{"generate", "-o", "out", p},
			{"breaking", "--against", "path:" + p, "m"},
			{"breaking", "--against", "path:m", p},
		} {
			code, _, errs := wfgenWithin(t, args...)
			if code != 2 || !strings.Contains(errs, p+" is not a regular file (it is a named pipe); wfgen reads manifests from regular files") {
				t.Errorf("wfgen %v: exit %d, %q", args, code, errs)
			}
		}
	}
	// A pipe where wfgen.yaml belongs is an error too, not a hang.
	if err := syscall.Mkfifo(ConfigName, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := wfgenWithin(t, "validate", "m"); code != 2 || !strings.Contains(errs, "wfgen.yaml is not a regular file") {
		t.Errorf("pipe as wfgen.yaml: exit %d, %q", code, errs)
	}
}
