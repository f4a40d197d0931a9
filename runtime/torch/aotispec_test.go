package torch

import (
	"errors"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/engine"
	wfspec "github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// The pytree specs torch 2.6 wrote for an encoder exported with args
// (features,) and kwargs {normalize: True}, returning a dict.
const (
	encInSpec  = `[1, {"type": "builtins.tuple", "context": "null", "children_spec": [{"type": "builtins.tuple", "context": "null", "children_spec": [{"type": null, "context": null, "children_spec": []}]}, {"type": "builtins.dict", "context": "[\"normalize\"]", "children_spec": [{"type": null, "context": null, "children_spec": []}]}]}]`
	encOutSpec = `[1, {"type": "builtins.dict", "context": "[\"embedding\", \"norm\"]", "children_spec": [{"type": null, "context": null, "children_spec": []}, {"type": null, "context": null, "children_spec": []}]}]`
	encSpec    = `{"version": 1, "inputs": [{"name": "features", "dtype": "float32", "shape": ["batch", 32]}, {"name": "normalize", "keyword": true, "constant": true, "value": true}], "outputs": [{"name": "embedding", "dtype": "float32", "shape": ["batch", 16]}, {"name": "norm", "dtype": "float32", "shape": ["batch"]}], "returns": "dict", "dims": {"batch": {"min": 2, "max": 16}}}`
)

func encInfo() map[string]any {
	return map[string]any{"in_spec": encInSpec, "out_spec": encOutSpec, "num_inputs": "1",
		"metadata.AOTI_DEVICE_KEY": "cpu", "metadata." + CallSpecKey: encSpec}
}

func TestPackageInfo(t *testing.T) {
	p, err := packageInfo(encInfo())
	if err != nil {
		t.Fatal(err)
	}
	if p.device != "cpu" || p.spec.Returns != engine.ReturnsDict || len(p.spec.Tensors()) != 1 || p.spec.Dims["batch"] != (engine.DimRange{Min: 2, Max: 16}) {
		t.Fatalf("%+v", p)
	}
	nested := `[1, {"type": "builtins.tuple", "context": "null", "children_spec": [{"type": "builtins.tuple", "context": "null", "children_spec": [{"type": "builtins.list", "context": "null", "children_spec": [{"type": null, "context": null, "children_spec": []}]}]}, {"type": "builtins.dict", "context": "[\"normalize\"]", "children_spec": [{"type": null, "context": null, "children_spec": []}]}]}]`
	cases := []struct {
		name string
		edit func(map[string]any)
		want string
	}{
		{"no call spec", func(m map[string]any) { delete(m, "metadata."+CallSpecKey) }, "has no wfgen call spec"},
		{"bad json", func(m map[string]any) { m["metadata."+CallSpecKey] = "{" }, "wfgen.call_spec metadata: unexpected end of JSON input"},
		{"nested input", func(m map[string]any) { m["in_spec"] = nested }, `positional argument "features" is a nested builtins.list`},
		{"keyword renamed", func(m map[string]any) {
			m["metadata."+CallSpecKey] = strings.Replace(encSpec, `"name": "normalize"`, `"name": "norm_it"`, 1)
		}, `does not match the package's inputs: 1 positional, keywords ["normalize"]`},
		{"inputs count", func(m map[string]any) { m["num_inputs"] = "2" }, "the compiled model takes 2 tensor inputs, but the recorded call spec has 1"},
		{"tuple out", func(m map[string]any) {
			m["out_spec"] = `[1, {"type": "builtins.tuple", "context": "null", "children_spec": [{"type": null, "context": null, "children_spec": []}, {"type": null, "context": null, "children_spec": []}]}]`
		}, `the recorded call spec returns dict ["embedding" "norm"], but the package returns a tuple of 2`},
		{"other node", func(m map[string]any) {
			m["out_spec"] = `[1, {"type": "collections.namedtuple", "context": "{}", "children_spec": []}]`
		}, "the package returns a collections.namedtuple"},
		{"bad dtype", func(m map[string]any) {
			m["metadata."+CallSpecKey] = strings.Replace(encSpec, `"dtype": "float32", "shape": ["batch", 32]`, `"dtype": "float64", "shape": ["batch", 32]`, 1)
		}, `input "features": dtype "float64" is not one the engine passes`},
		{"unknown dim", func(m map[string]any) {
			m["metadata."+CallSpecKey] = strings.Replace(encSpec, `["batch", 16]`, `["n", 16]`, 1)
		}, `output "embedding": shape [n,16]: dimension n has no range`},
		{"not a treespec", func(m map[string]any) { m["in_spec"] = "{}" }, "not a pytree treespec"},
	}
	for _, c := range cases {
		info := encInfo()
		c.edit(info)
		_, err := packageInfo(info)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
		if c.name == "no call spec" && !errors.Is(err, errNoCallSpec) {
			t.Errorf("no call spec: %v is not errNoCallSpec", err)
		}
	}
}

func TestBindInputs(t *testing.T) {
	p, err := packageInfo(encInfo())
	if err != nil {
		t.Fatal(err)
	}
	spec := &p.spec
	x := tensor.Zeros(tensor.Float32, 4, 32)
	got, err := bindInputs(spec, map[string]any{"features": x, "normalize": true})
	if err != nil || len(got) != 1 || got[0] != x {
		t.Fatalf("got %v, %v", got, err)
	}
	two := engine.CallSpec{
		Inputs: []engine.CallInput{{Name: "a", DType: tensor.Float32, Shape: wfspec.Shape{"n", "*"}},
			{Name: "b", DType: tensor.Int64, Shape: wfspec.Shape{"n"}}, {Name: "k", Keyword: true, Constant: true, Value: float64(3)}},
		Dims: map[string]engine.DimRange{"n": {Min: 1}},
	}
	if _, err := bindInputs(&two, map[string]any{"a": tensor.Zeros(tensor.Float32, 3, 7), "b": tensor.Zeros(tensor.Int64, 3), "k": int64(3)}); err != nil {
		t.Fatalf("int restating a float constant: %v", err)
	}
	_, err = bindInputs(&two, map[string]any{"a": tensor.Zeros(tensor.Float32, 3, 7), "b": tensor.Zeros(tensor.Int64, 4)})
	if err == nil || !strings.Contains(err.Error(), `input "b": dimension n is 4, but input "a" has 3`) {
		t.Fatalf("disagreeing dims: %v", err)
	}
	if _, err := bindInputs(&two, map[string]any{"a": (*tensor.Tensor)(nil), "b": tensor.Zeros(tensor.Int64, 4)}); err == nil || !strings.Contains(err.Error(), "not a nil tensor") {
		t.Fatalf("nil tensor: %v", err)
	}
}

func TestAssembleOutputsAndLoadDType(t *testing.T) {
	a, b := tensor.Zeros(tensor.Float32, 1), tensor.Zeros(tensor.Float32, 2)
	outs := []engine.CallOutput{{Name: "x"}, {Name: "y"}}
	for _, c := range []struct {
		returns string
		want    string
	}{{engine.ReturnsDict, "map[string]interface {}"}, {engine.ReturnsTuple, "[]interface {}"}} {
		v, err := assembleOutputs(&engine.CallSpec{Outputs: outs, Returns: c.returns}, []any{a, b})
		if err != nil || typeName(v) != c.want {
			t.Errorf("%s: %T %v", c.returns, v, err)
		}
	}
	v, err := assembleOutputs(&engine.CallSpec{Outputs: outs[:1], Returns: engine.ReturnsTensor}, []any{a})
	if err != nil || v != any(a) {
		t.Errorf("tensor: %v %v", v, err)
	}
	if _, err := assembleOutputs(&engine.CallSpec{Outputs: outs, Returns: engine.ReturnsDict}, []any{a}); err == nil {
		t.Error("one output for two: no error")
	}
	spec := &engine.CallSpec{Inputs: []engine.CallInput{{Name: "ids", DType: tensor.Int64}}, Outputs: []engine.CallOutput{{Name: "o", DType: tensor.Float16}}}
	if err := checkLoadDType(spec, tensor.Float16); err != nil {
		t.Error(err)
	}
	if err := checkLoadDType(spec, tensor.Float32); err == nil || !strings.Contains(err.Error(), "compiled for float16") {
		t.Errorf("float32 on a float16 package: %v", err)
	}
}

func typeName(v any) string {
	switch v.(type) {
	case map[string]any:
		return "map[string]interface {}"
	case []any:
		return "[]interface {}"
	}
	return ""
}
