package importer

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/gen/validate"

	"github.com/worldfoundry/wfgen/runtime/contract"
	"github.com/worldfoundry/wfgen/runtime/engine"
)

// A tuple return becomes one artifact per element, at its position (an
// Optional element not required), a List[Tensor] return a tensor_list
// artifact; the skeleton passes the contract check against the schemas
// (Skeleton checks it). An element no artifact kind holds is refused,
// naming its position. A NamedTuple's elements are named by its fields; a
// nested tuple's elements are artifacts in order.
func TestSkeletonStructuredReturns(t *testing.T) {
	t.Parallel()
	methods := []engine.MethodSchema{
		{Name: "forward", Arguments: []engine.Argument{{Name: "x", Type: "Tensor"}}, Returns: []string{"Tuple[Tensor, Optional[Tensor], List[Tensor]]"}},
		{Name: "flows", Arguments: []engine.Argument{{Name: "x", Type: "Tensor"}}, Returns: []string{"List[Tensor]"}},
		{Name: "pair", Returns: []string{"Tensor", "str"}},
		{Name: "nested", Returns: []string{"Tuple[Tensor, Optional[Tuple[Tensor, List[Tensor]]], Tuple[int, int]]"}},
	}
	// flows is the NamedTuple (logits, aux, ...) of another model: no
	// names for a tuple of another length; pair's second name is no id.
	ck := Checkpoint{Path: "m.pt", TupleNames: map[string][]string{
		"forward": {"logits", "aux_logits", "flows"},
		"flows":   {"a", "b"},
		"pair":    {"first", "2nd"},
	}}
	res, err := Skeleton(ck, methods, Options{})
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
		"forward logits tensor 0 true", "forward aux_logits tensor 1 false", "forward flows tensor_list 2 true",
		"flows output tensor_list - true",
		"pair first tensor 0 true", "pair output_1 text 1 true",
		// a nested tuple's elements, in order: no positions (a position
		// is an element of the outer tuple)
		"nested output_0 tensor - true", "nested output_1 tensor - false", "nested output_2 tensor_list - false", "nested output_3 json - true",
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

// A tuple element that is a dict of tensors, or a list of them, becomes a
// record or record_list artifact whose fields are the keys the code shows
// (Checkpoint.DictKeys), by position: required when every path of the
// inference sets them. Without keys, or when the code does not show them
// all, the import refuses, naming the element and where the code stops
// telling, rather than write an artifact that cannot load.
func TestSkeletonRecordReturns(t *testing.T) {
	t.Parallel()
	detect := engine.MethodSchema{Name: "forward", Arguments: []engine.Argument{{Name: "images", Type: "List[Tensor]"}},
		Returns: []string{"Tuple[Dict[str, Tensor], List[Dict[str, Tensor]]]"}}
	ck := Checkpoint{Path: "m.pt", DictKeys: map[string]contract.DictKeys{"forward": {Values: []contract.ValueKeys{
		{Keys: []contract.ReturnKey{{Name: "bbox_regression"}, {Name: "classification"}}, Complete: true},
		{Keys: []contract.ReturnKey{{Name: "boxes", Always: true}, {Name: "scores", Always: true}, {Name: "labels", Always: true}, {Name: "masks"}}, Complete: true},
	}}}}
	res, err := Skeleton(ck, []engine.MethodSchema{detect}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	f, diags := validate.Bytes("m.yaml", res.YAML)
	if len(diags) > 0 {
		t.Fatalf("the skeleton does not validate: %v\n%s", diags, res.YAML)
	}
	var got []string
	for _, a := range f.Spec.Tasks[0].Outputs {
		line := fmt.Sprintf("%s %s %d %v:", a.ArtifactID, a.Kind, *a.Position, a.Required)
		for _, k := range a.Fields {
			line += fmt.Sprintf(" %s=%v", k.Name, k.Required)
		}
		got = append(got, line)
	}
	want := []string{
		"output_0 record 0 true: bbox_regression=false classification=false",
		"output_1 record_list 1 true: boxes=true scores=true labels=true masks=false",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("artifacts:\n%s\nwant:\n%s\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), res.YAML)
	}

	ck.DictKeys = nil
	_, err = Skeleton(ck, []engine.MethodSchema{detect}, Options{})
	var untyped *UntypedError
	if !errors.As(err, &untyped) || !strings.Contains(err.Error(), "element 0 of the tuple forward returns, Dict[str, Tensor], is a dict of tensors whose keys the code of forward does not show") ||
		!strings.Contains(err.Error(), "an artifact of kind record whose fields are the keys") {
		t.Errorf("a dict without keys: %v", err)
	}
	// Keys, but not all of them: refused, with where the code stops telling.
	ck.DictKeys = map[string]contract.DictKeys{"forward": {Values: []contract.ValueKeys{
		{Keys: []contract.ReturnKey{{Name: "loss"}}, Why: "code/__torch__/m.py:7 (Net.forward): passed to f, whose code this reader does not follow"},
		{Keys: []contract.ReturnKey{{Name: "boxes", Always: true}}, Complete: true},
	}}}
	_, err = Skeleton(ck, []engine.MethodSchema{detect}, Options{})
	if !errors.As(err, &untyped) || !strings.Contains(err.Error(), "element 0 of the tuple forward returns, Dict[str, Tensor], is a dict of tensors whose keys the code of forward does not show (the trail stops at code/__torch__/m.py:7 (Net.forward): passed to f") {
		t.Errorf("a dict whose keys are not all known: %v", err)
	}
	lists := engine.MethodSchema{Name: "detect", Arguments: []engine.Argument{{Name: "x", Type: "Tensor"}}, Returns: []string{"List[Dict[str, Tensor]]"}}
	ck.DictKeys = map[string]contract.DictKeys{"detect": {Values: []contract.ValueKeys{{Keys: []contract.ReturnKey{{Name: "boxes", Always: true}}, Complete: true}}}}
	res, err = Skeleton(ck, []engine.MethodSchema{lists}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if f, diags = validate.Bytes("m.yaml", res.YAML); len(diags) > 0 || f.Spec.Tasks[0].Outputs[0].Kind != "record_list" || f.Spec.Tasks[0].Outputs[0].Fields[0].Name != "boxes" {
		t.Errorf("a List[Dict[str, Tensor]] return: %v\n%s", diags, res.YAML)
	}
}
