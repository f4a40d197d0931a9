package importer

import (
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/gen/validate"
	"github.com/worldfoundry/wfgen/runtime/contract"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// encoderCallSpec is the call spec of examples/aoti's encoder.
func encoderCallSpec() engine.CallSpec {
	return engine.CallSpec{
		Inputs: []engine.CallInput{
			{Name: "features", DType: tensor.Float32, Shape: spec.Shape{"batch", "32"}},
			{Name: "normalize", Keyword: true, Constant: true, Value: true},
		},
		Outputs: []engine.CallOutput{
			{Name: "embedding", DType: tensor.Float32, Shape: spec.Shape{"batch", "16"}},
			{Name: "norm", DType: tensor.Float32, Shape: spec.Shape{"batch"}},
		},
		Returns: engine.ReturnsDict,
		Dims:    map[string]engine.DimRange{"batch": {Min: 2, Max: 16}},
	}
}

// The skeleton of a package validates and passes the contract check against
// the call spec it came from: fields, dtypes, shapes and the batch range
// are the export's, the baked-in argument a warning.
func TestSkeletonFromCallSpec(t *testing.T) {
	t.Parallel()
	ck := Checkpoint{Path: "models/encoder.pt2", SHA256: strings.Repeat("ab", 32), SizeBytes: 373535}
	res, err := SkeletonFromCallSpec(ck, encoderCallSpec(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	y := string(res.YAML)
	for _, want := range []string{
		"model_family_id: encoder\n",
		"format: aotinductor\n",
		"size_bytes: 373535\n",
		"# The package takes batches of 2 to 16 items: longer ones are split and shorter ones padded.\n      max_batch_size: 16\n      dim: batch\n",
		"    # Add invariant: true for answers that never depend on the batch: the same bits\n",
		"    # differ in the last bits. The cost is padding (docs/batching.md, batch-invariant mode).\n    batching:\n",
		"- field_id: features\n        label: Features\n        kind: tensor\n        required: true\n        dtype: float32\n        shape: [batch, 32]\n",
		"- artifact_id: embedding\n        kind: tensor\n        required: true\n        dtype: float32\n        shape: [batch, 16]\n",
		"- artifact_id: norm\n",
		"# TODO: argument normalize was baked in at export as True: it is no field",
	} {
		if !strings.Contains(y, want) {
			t.Errorf("skeleton lacks %q:\n%s", want, y)
		}
	}
	if len(res.Warnings) != 1 {
		t.Errorf("warnings %q, want the baked-in argument", res.Warnings)
	}
	f, diags := validate.Bytes("encoder.yaml", res.YAML)
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	if err := contract.CheckCallSpec(&f.Spec.Tasks[0], &f.Spec.Variants[0], encoderCallSpec()); err != nil {
		t.Fatalf("the skeleton does not pass the contract check: %v\n%s", err, y)
	}

	// A dimension that does not lead every tensor is no batch: it gets its
	// range in dims.
	s := encoderCallSpec()
	s.Inputs[0].Shape = spec.Shape{"4", "t"}
	s.Outputs = s.Outputs[1:]
	s.Outputs[0].Shape = spec.Shape{"t"}
	s.Returns = engine.ReturnsTensor
	s.Dims = map[string]engine.DimRange{"t": {Min: 1}}
	res, err = SkeletonFromCallSpec(ck, s, Options{FamilyID: "seq"})
	if err != nil {
		t.Fatal(err)
	}
	y = string(res.YAML)
	if strings.Contains(y, "batching") || !strings.Contains(y, "dims:\n      t:\n        minimum: 1\n") {
		t.Errorf("unbatched skeleton:\n%s", y)
	}
	f, diags = validate.Bytes("seq.yaml", res.YAML)
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	if err := contract.CheckCallSpec(&f.Spec.Tasks[0], nil, s); err != nil {
		t.Fatalf("contract: %v\n%s", err, y)
	}

	for _, c := range []struct {
		opts Options
		want string
	}{
		{Options{Methods: []string{"encode"}}, `is an AOTInductor package, whose one method is forward, not "encode"`},
		{Options{Batched: true}, "import it without --example and --batched"},
		{Options{FamilyID: "Bad Id"}, `family id "Bad Id"`},
	} {
		if _, err := SkeletonFromCallSpec(ck, encoderCallSpec(), c.opts); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.opts, err, c.want)
		}
	}
}
