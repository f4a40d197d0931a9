package dist

import (
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/proc/torchrun"
)

func TestSpanTilesAlignedAndBalanced(t *testing.T) {
	for n := 0; n <= 70; n++ {
		for _, unit := range []int{0, 1, 3, 8} {
			for size := 1; size <= 5; size++ {
				next, most, least := 0, -1, 1<<30
				for r := range size {
					lo, hi := Span(n, unit, r, size)
					if lo != next || hi < lo || hi > n {
						t.Fatalf("Span(%d, %d, %d, %d) = [%d, %d), want a start at %d", n, unit, r, size, lo, hi, next)
					}
					u := max(unit, 1)
					if lo%u != 0 && lo != n {
						t.Fatalf("Span(%d, %d, %d, %d) = [%d, %d) does not start on a chunk", n, unit, r, size, lo, hi)
					}
					chunks := (hi - lo + u - 1) / u
					most, least = max(most, chunks), min(least, chunks)
					next = hi
				}
				if next != n || most-least > 1 {
					t.Fatalf("Span(%d, %d, ·, %d): covers [0, %d), chunks per rank %d..%d", n, unit, size, next, least, most)
				}
			}
		}
	}
	if lo, hi := Span(10, 1, 4, 4); lo != 0 || hi != 0 {
		t.Errorf("rank outside the world: [%d, %d)", lo, hi)
	}
}

func TestChooseBackend(t *testing.T) {
	w := torchrun.Worker{Rank: 3, WorldSize: 4, LocalRank: 1, LocalWorldSize: 2}
	cases := []struct {
		requested string
		available []string
		cuda      int
		backend   string
		device    string
		err       string
	}{
		{"", []string{Gloo}, 0, Gloo, "cpu", ""},
		{"", []string{Gloo}, 2, Gloo, "cpu", ""}, // a CPU-only engine on a GPU machine
		{"", []string{Gloo, NCCL}, 0, Gloo, "cpu", ""},
		{"", []string{Gloo, NCCL}, 2, NCCL, "cuda:1", ""},
		{"auto", []string{Gloo, NCCL}, 2, NCCL, "cuda:1", ""},
		{Gloo, []string{Gloo, NCCL}, 2, Gloo, "cpu", ""},
		{NCCL, []string{Gloo, NCCL}, 2, NCCL, "cuda:1", ""},
		{NCCL, []string{Gloo}, 2, "", "", "built without NCCL"},
		{NCCL, []string{Gloo, NCCL}, 0, "", "", "no CUDA device"},
		{NCCL, []string{Gloo, NCCL}, 1, "", "", "LOCAL_RANK=1 but only 1 CUDA device"},
		{"", []string{Gloo, NCCL}, 1, "", "", "LOCAL_RANK=1 but only 1 CUDA device"},
		{"mpi", []string{Gloo}, 0, "", "", `unknown backend "mpi"`},
		{"", nil, 0, "", "", "no gloo backend"},
	}
	for _, c := range cases {
		b, d, err := chooseBackend(c.requested, c.available, w, c.cuda)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q %v cuda=%d: %v, want an error with %q", c.requested, c.available, c.cuda, err, c.err)
			}
			continue
		}
		if err != nil || b != c.backend || d != c.device {
			t.Errorf("%q %v cuda=%d: %s %s %v, want %s %s", c.requested, c.available, c.cuda, b, d, err, c.backend, c.device)
		}
	}
}
