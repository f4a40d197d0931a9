package importer

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/gen/validate"

	"github.com/worldfoundry/wfgen/runtime/engine"
)

// A tuple return becomes one artifact per element, at its position (an
// Optional element not required), a List[Tensor] return a tensor_list
// artifact; the skeleton passes the contract check against the schemas
// (Skeleton checks it). An element no artifact kind holds is refused,
// naming its position.
func TestSkeletonStructuredReturns(t *testing.T) {
	t.Parallel()
	methods := []engine.MethodSchema{
		{Name: "forward", Arguments: []engine.Argument{{Name: "x", Type: "Tensor"}}, Returns: []string{"Tuple[Tensor, Optional[Tensor], List[Tensor]]"}},
		{Name: "flows", Arguments: []engine.Argument{{Name: "x", Type: "Tensor"}}, Returns: []string{"List[Tensor]"}},
		{Name: "pair", Returns: []string{"Tensor", "str"}},
	}
	res, err := Skeleton(Checkpoint{Path: "m.pt"}, methods, Options{})
	if err != nil {
		t.Fatal(err)
	}
	f, diags := validate.Bytes("m.yaml", res.YAML)
	if len(diags) > 0 {
		t.Fatalf("the skeleton does not validate: %v\n%s", diags, res.YAML)
	}
	var got []string
	for _, task := range f.Spec.Tasks {
		for _, a := range task.Outputs {
			pos := "-"
			if a.Position != nil {
				pos = strconv.Itoa(*a.Position)
			}
			got = append(got, fmt.Sprintf("%s %s %s %s %v", task.TaskID, a.ArtifactID, a.Kind, pos, a.Required))
		}
	}
	want := []string{
		"forward output_0 tensor 0 true", "forward output_1 tensor 1 false", "forward output_2 tensor_list 2 true",
		"flows output tensor_list - true",
		"pair output_0 tensor 0 true", "pair output_1 text 1 true",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("artifacts:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	_, err = Skeleton(Checkpoint{Path: "m.pt"}, []engine.MethodSchema{{Name: "detect", Returns: []string{"Tuple[Tensor, __torch__.Boxes]"}}}, Options{})
	var untyped *UntypedError
	if !errors.As(err, &untyped) || !strings.Contains(err.Error(), "element 1 of the tuple detect returns, __torch__.Boxes (return type Tuple[Tensor, __torch__.Boxes]), has no artifact kind") {
		t.Errorf("an element no kind holds: %v", err)
	}
}
