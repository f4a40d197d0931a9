//go:build cgo

package torch

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestSingleProcWarning starts the engine in a child process with
// GOMAXPROCS=1 and checks that it warns, once, and not with two Ps.
func TestSingleProcWarning(t *testing.T) {
	if os.Getenv("WFGEN_TEST_ENGINE_INIT") != "" {
		if _, err := Default().ParallelInfo(); err != nil {
			t.Fatal(err)
		}
		if _, err := Default().ParallelInfo(); err != nil {
			t.Fatal(err)
		}
		return
	}
	for _, procs := range []string{"1", "2"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSingleProcWarning$", "-test.count=1")
		cmd.Env = append(os.Environ(), "WFGEN_TEST_ENGINE_INIT=1", "GOMAXPROCS="+procs)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("GOMAXPROCS=%s child: %v\n%s", procs, err, out)
		}
		n := strings.Count(string(out), "GOMAXPROCS=1 makes the Go runtime hand its P to another thread")
		if want := map[string]int{"1": 1, "2": 0}[procs]; n != want {
			t.Errorf("GOMAXPROCS=%s: warning logged %d times, want %d\n%s", procs, n, want, out)
		}
	}
}
