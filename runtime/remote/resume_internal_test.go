package remote

import (
	"maps"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/stream"
)

// TestResumePoint: the controls in force at a chunk are the last change
// from it or before; moving the point to a snapshot keeps those in force
// there and the changes after it, so a reopen from it applies the same
// controls at every chunk.
func TestResumePoint(t *testing.T) {
	right, fwd, none := stream.Controls{"right": 1}, stream.Controls{"forward": 1}, stream.Controls{}
	p := resumePoint{next: 0, log: []controlsChange{{0, right}, {3, fwd}, {5, none}, {5, right}}}
	at := func(i int) stream.Controls { return p.at(i) }
	for i, want := range []stream.Controls{right, right, right, fwd, fwd, right, right} {
		if got := at(i); !maps.Equal(got, want) {
			t.Fatalf("at(%d) = %v, want %v", i, got, want)
		}
	}
	before := make([]stream.Controls, 8)
	for i := 4; i < 8; i++ {
		before[i] = at(i)
	}
	p.moveTo([]byte("token"), 4)
	if p.next != 4 || string(p.token) != "token" || len(p.log) != 3 || p.log[0].from != 4 {
		t.Fatalf("moved: next %d, log %v", p.next, p.log)
	}
	for i := 4; i < 8; i++ {
		if got := at(i); !maps.Equal(got, before[i]) {
			t.Fatalf("after the move, at(%d) = %v, want %v", i, got, before[i])
		}
	}
}
