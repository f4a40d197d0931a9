package importer

import (
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/gen/validate"
	"github.com/worldfoundry/wfgen/runtime/contract"
	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/spec"
)

// A Dict[str, Tensor] argument becomes a tensor_dict field whose parts are
// the keys the method's code reads; a Tuple[Tensor, ...] argument a
// tensor_tuple field with one part per element; both validate.
func TestSkeletonStructuredArguments(t *testing.T) {
	t.Parallel()
	ck := checkpoint
	ck.DictKeys = map[string]contract.DictKeys{"forward": {Arguments: map[string][]string{"features": {"a", "b"}}}}
	schemas := []engine.MethodSchema{{Name: "forward", Arguments: []engine.Argument{
		{Name: "features", Type: "Dict[str, Tensor]"},
		{Name: "pair", Type: "Tuple[Tensor, Tensor]"},
	}, Returns: []string{"Tensor"}}}
	res, err := Skeleton(ck, schemas, Options{})
	if err != nil {
		t.Fatal(err)
	}
	f, diags := validate.Bytes("x.yaml", res.YAML)
	if len(diags) > 0 {
		t.Fatalf("%v\n%s", diags, res.YAML)
	}
	in := f.Spec.Tasks[0].Inputs
	got := func(i int) string {
		var names []string
		for _, p := range in[i].Fields {
			if !p.Required {
				t.Errorf("%s part %s not required", in[i].FieldID, p.Name)
			}
			names = append(names, p.Name)
		}
		return string(in[i].Kind) + " " + strings.Join(names, ",")
	}
	if len(in) != 2 || got(0) != "tensor_dict a,b" || got(1) != "tensor_tuple item0,item1" {
		t.Errorf("inputs %+v\n%s", in, res.YAML)
	}
	if in[1].TorchScriptType() != "Tuple[Tensor, Tensor]" || in[0].TorchScriptType() != "Dict[str, Tensor]" {
		t.Errorf("types %s, %s", in[0].TorchScriptType(), in[1].TorchScriptType())
	}
	if in[0].Kind != spec.KindTensorDict {
		t.Errorf("kind %s", in[0].Kind)
	}

	// Keys the code does not show: refused, naming the argument.
	_, err = Skeleton(checkpoint, schemas, Options{})
	if err == nil || !strings.Contains(err.Error(), "argument features: Dict[str, Tensor] of forward is a dict of tensors whose keys the code of forward does not show") {
		t.Errorf("no keys: %v", err)
	}
}
