//go:build cgo

package torch

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/torch/internal/shim"
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

// TestThreadsReachBLAS starts the engine in a child process with
// WORLDFOUNDRY_TORCH_THREADS=1 and checks that OpenBLAS's own pool has one
// thread too, and that OPENBLAS_NUM_THREADS, when set, wins.
func TestThreadsReachBLAS(t *testing.T) {
	if os.Getenv("WFGEN_TEST_ENGINE_INIT") != "" {
		if _, err := Default().ParallelInfo(); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("blas threads %d\n", shim.BLASThreads(0))
		return
	}
	if shim.BLASThreads(0) < 0 {
		t.Skip("this libtorch's BLAS is not OpenBLAS")
	}
	for _, c := range []struct {
		env  []string
		want int
	}{
		{[]string{EnvThreads + "=1"}, 1},
		{[]string{EnvThreads + "=1", "OPENBLAS_NUM_THREADS=2"}, 2},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestThreadsReachBLAS$", "-test.count=1")
		cmd.Env = append(append(os.Environ(), "WFGEN_TEST_ENGINE_INIT=1"), c.env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v child: %v\n%s", c.env, err, out)
		}
		if want := fmt.Sprintf("blas threads %d\n", c.want); !strings.Contains(string(out), want) {
			t.Errorf("%v: child printed %q, want %q", c.env, out, want)
		}
	}
}
