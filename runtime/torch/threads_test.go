//go:build cgo

package torch

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestThreadVariables starts the engine in child processes and checks
// what WORLDFOUNDRY_TORCH_THREADS, _INTEROP_THREADS and _MAX_CALLS do —
// variables of wfgen's own, which the Python runtime does not read
// (docs/differences.md): libtorch's intra-op and inter-op thread counts
// (as at::get_parallel_info reports them) and the number of calls inside
// libtorch at once, GOMAXPROCS by default. A value that is not a positive
// integer fails the engine's first use, naming the variable.
func TestThreadVariables(t *testing.T) {
	if os.Getenv("WFGEN_TEST_THREAD_VARS") != "" {
		info, err := Default().ParallelInfo()
		if err != nil {
			fmt.Printf("error: %v\n", err)
			return
		}
		fmt.Printf("%s\nmax calls %d\n", info, cap(Default().sem))
		return
	}
	intra := regexp.MustCompile(`at::get_num_threads\(\) : (\d+)`)
	inter := regexp.MustCompile(`at::get_num_interop_threads\(\) : (\d+)`)
	calls := regexp.MustCompile(`max calls (\d+)`)
	child := func(env ...string) string {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run=^TestThreadVariables$", "-test.count=1")
		cmd.Env = append(os.Environ(), append([]string{"WFGEN_TEST_THREAD_VARS=1", EnvThreads + "=", EnvInteropThreads + "=", EnvMaxCalls + "=", "GOMAXPROCS=2"}, env...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", env, err, out)
		}
		return string(out)
	}
	get := func(re *regexp.Regexp, out string) string {
		if m := re.FindStringSubmatch(out); m != nil {
			return m[1]
		}
		return "none"
	}
	out := child(EnvThreads+"=1", EnvInteropThreads+"=3", EnvMaxCalls+"=5")
	if get(intra, out) != "1" || get(inter, out) != "3" || get(calls, out) != "5" {
		t.Errorf("THREADS=1 INTEROP_THREADS=3 MAX_CALLS=5: intra %s, inter %s, max calls %s\n%s", get(intra, out), get(inter, out), get(calls, out), out)
	}
	out = child(EnvInteropThreads+"=2", EnvMaxCalls+"=1")
	if get(inter, out) != "2" || get(calls, out) != "1" {
		t.Errorf("INTEROP_THREADS=2 MAX_CALLS=1: inter %s, max calls %s\n%s", get(inter, out), get(calls, out), out)
	}
	if out = child(); get(calls, out) != "2" {
		t.Errorf("MAX_CALLS unset with GOMAXPROCS=2: max calls %s, want 2\n%s", get(calls, out), out)
	}
	for _, bad := range []string{EnvThreads + "=0", EnvInteropThreads + "=many", EnvMaxCalls + "=0", EnvMaxCalls + "=-3"} {
		name, _, _ := strings.Cut(bad, "=")
		if out := child(bad); !strings.Contains(out, "error: "+name) {
			t.Errorf("%s: want an error naming %s, got\n%s", bad, name, out)
		}
	}
}
