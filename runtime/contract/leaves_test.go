package contract

import (
	"fmt"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/spec"
)

// A nested tuple holding more than plain data is replaced by its
// elements, depth first, Optional when a tuple on the way is; one of
// plain data stays one element.
func TestTupleLeaves(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ typ, want string }{
		{"Tuple[Tensor, Tensor]", "[0] Tensor; [1] Tensor"},
		{"Optional[Tuple[Tensor, str]]", "[0] Optional[Tensor]; [1] Optional[str]"},
		{"Tuple[Tensor, Tuple[Tensor, Optional[Tuple[Tensor, List[Tensor]]]], Tuple[int, int]]",
			"[0] Tensor; [1 0] Tensor; [1 1 0] Optional[Tensor]; [1 1 1] Optional[List[Tensor]]; [2] Tuple[int, int]"},
		{"Tuple[()]", ""},
		{"Tensor", "none"},
	} {
		typ, err := ParseType(c.typ)
		if err != nil {
			t.Fatal(err)
		}
		leaves := TupleLeaves(typ)
		var got []string
		for _, l := range leaves {
			got = append(got, fmt.Sprintf("%v %s", l.Path, l.Type))
		}
		s := strings.Join(got, "; ")
		if leaves == nil {
			s = "none"
		}
		if s != c.want {
			t.Errorf("%s: %s, want %s", c.typ, s, c.want)
		}
	}
}

// TuplePaths gives each artifact its element's path, in order (a leaf of
// a nested tuple) or by position (an element of the outer tuple); nil for a task whose artifacts are no tuple's elements.
func TestTuplePaths(t *testing.T) {
	t.Parallel()
	nested := engine.MethodSchema{Returns: []string{"Tuple[Tensor, Tuple[Tensor, Tensor]]"}}
	inOrder := &spec.InferenceTaskProfile{TaskID: "t", Outputs: []spec.InferenceArtifactSpec{
		artifact("a", spec.ArtifactTensor), artifact("b", spec.ArtifactTensor), artifact("c", spec.ArtifactTensor)}}
	if got := fmt.Sprint(TuplePaths(inOrder, nested)); got != "[[0] [1 0] [1 1]]" {
		t.Errorf("in order: %s", got)
	}
	byPosition := &spec.InferenceTaskProfile{TaskID: "t", Outputs: []spec.InferenceArtifactSpec{
		positioned("c", spec.ArtifactTensor, 2), positioned("a", spec.ArtifactTensor, 0)}}
	// A position is an element of the outer tuple: no manifest's
	// position moves now that nested tuples are read.
	if got := fmt.Sprint(TuplePaths(byPosition, nested)); got != "[[2] [0]]" {
		t.Errorf("by position: %s", got)
	}
	if got := TuplePaths(inOrder, engine.MethodSchema{Returns: []string{"Dict[str, Tensor]"}}); got != nil {
		t.Errorf("a dict: %v", got)
	}
}
