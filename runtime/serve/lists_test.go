package serve_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/golden/structured/output/goldenstructured"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/oip"
	"github.com/worldfoundry/wfgen/runtime/remote"
	"github.com/worldfoundry/wfgen/runtime/serve"
	"github.com/worldfoundry/wfgen/runtime/tensor"
	"github.com/worldfoundry/wfgen/runtime/torch"
)

// listSource is a module for the golden structured family's manifest whose
// lists have elements of several dtypes and shapes: split returns a tuple
// holding a list, pyramid a list — empty for an input without rows.
const listSource = `
def forward(self, x: Tensor) -> Tuple[Tensor, Tensor]:
    h = torch.tanh(torch.matmul(x, self.w))
    return h, h.mean(dim=0)

def split(self, x: Tensor) -> Tuple[Tensor, List[Tensor]]:
    return x.sum(), [x[0:1], x[1:3] * 2.0]

def pyramid(self, x: Tensor) -> List[Tensor]:
    out: List[Tensor] = []
    if x.size(0) > 0:
        out.append(x * 2.0)
        out.append(x.sum(0))
        out.append(x > 0)
        out.append(x.long())
        out.append(x.half() / 3.0)
        out.append(x.to(15) * 0.1)
        out.append(x[0:0])
        out.append(torch.matmul(x, self.w).sum())
    return out
`

// listModule builds listSource and returns its path.
func listModule(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "structured.pt")
	w := tensor.FromFloat32([]float32{0.5, -0.25, 1, 0.75, 0.125, -1, 0.3, 0.2, 0.1}, 3, 3)
	if err := torch.BuildModule(torch.ModuleSource{Source: listSource, Parameters: map[string]*tensor.Tensor{"w": w}}, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// listInput is a [rows, 3] float32 input with negative, fractional and
// whole values.
func listInput(rows int) *tensor.Tensor {
	v := make([]float32, rows*3)
	for i := range v {
		v[i] = float32(i)*0.37 - 1.5
	}
	return tensor.FromFloat32(v, int64(rows), 3)
}

// sameList fails unless got and want are the same list bit for bit: both
// nil or both not, the same length, each tensor's dtype, shape and bytes.
func sameList(t *testing.T, what string, got, want []*tensor.Tensor) {
	t.Helper()
	if (got == nil) != (want == nil) || len(got) != len(want) {
		t.Fatalf("%s: got %d tensors (nil %v), want %d (nil %v)", what, len(got), got == nil, len(want), want == nil)
	}
	for i := range want {
		if !tensorsEqual(got[i], want[i]) {
			t.Errorf("%s element %d: got %v %v % x, want %v %v % x", what, i, got[i].DType, got[i].Shape, got[i].Data, want[i].DType, want[i].Shape, want[i].Data)
		}
	}
}

// TestRemoteTensorListsEqualInProcess runs tasks returning List[Tensor]
// (alone, and inside a tuple) through wfserve with the generated remote
// client over REST with binary tensors, REST with JSON tensors and gRPC:
// every list is the in-process client's bit for bit — elements of six
// dtypes, a 0-row element and a scalar among them — and an empty list
// comes back empty, not absent.
func TestRemoteTensorListsEqualInProcess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := listModule(t)
	opts := []client.Option{client.WithCheckpointPath(path), client.WithDevice("cpu")}
	local, err := goldenstructured.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	s := withGRPC(t, serveFamilies(t, serve.Config{}, serve.Family{Spec: goldenstructured.Spec(), Options: opts}))

	for _, c := range []struct {
		name string
		url  string
		opts []remote.Option
	}{
		{"REST binary", s.url, nil},
		{"REST JSON", s.url, []remote.Option{remote.WithJSONTensors()}},
		{"gRPC", "grpc://" + s.addr, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			rc, err := client.Open[goldenstructured.Client](remote.New(goldenstructured.Spec(), c.url, c.opts...))
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()

			for _, rows := range []int{4, 1, 0} {
				want, err := local.Pyramid(ctx, goldenstructured.PyramidParams{X: listInput(rows)})
				if err != nil {
					t.Fatal(err)
				}
				got, err := rc.Pyramid(ctx, goldenstructured.PyramidParams{X: listInput(rows)})
				if err != nil {
					t.Fatalf("pyramid of %d rows: %v", rows, err)
				}
				if rows == 0 && (want.Levels == nil || len(want.Levels) != 0) {
					t.Fatalf("in-process pyramid of no rows: %d levels (nil %v), want an empty list", len(want.Levels), want.Levels == nil)
				}
				if rows > 0 {
					var dtypes []tensor.DType
					for _, l := range want.Levels {
						dtypes = append(dtypes, l.DType)
					}
					if w := []tensor.DType{tensor.Float32, tensor.Float32, tensor.Bool, tensor.Int64, tensor.Float16, tensor.BFloat16, tensor.Float32, tensor.Float32}; !slices.Equal(dtypes, w) {
						t.Fatalf("in-process pyramid's dtypes %v, want %v", dtypes, w)
					}
				}
				sameList(t, "levels", got.Levels, want.Levels)
			}

			want, err := local.Split(ctx, goldenstructured.SplitParams{X: listInput(4)})
			if err != nil {
				t.Fatal(err)
			}
			got, err := rc.Split(ctx, goldenstructured.SplitParams{X: listInput(4)})
			if err != nil {
				t.Fatal(err)
			}
			if !tensorsEqual(got.Total, want.Total) {
				t.Errorf("total: got %v, want %v", got.Total, want.Total)
			}
			sameList(t, "parts", got.Parts, want.Parts)
		})
	}
}

// TestTensorListOnTheWire is what a generic OIP client sees of a list: the
// elements as outputs named parts.0, parts.1 with their own datatype and
// shape, their count in the response parameter parts.count (0 for an empty
// list), an output filter naming the artifact selecting every element, and
// model metadata describing the list under its id.
func TestTensorListOnTheWire(t *testing.T) {
	t.Parallel()
	opts := []client.Option{client.WithCheckpointPath(listModule(t)), client.WithDevice("cpu")}
	s := serveFamilies(t, serve.Config{}, serve.Family{Spec: goldenstructured.Spec(), Options: opts})
	infer := s.url + "/v2/models/golden-structured/infer"
	x := `{"name":"x","datatype":"FP32","shape":[2,3],"data":[1,2,3,4,5,6]}`

	status, _, b := call(t, "POST", infer, `{"parameters":{"task":"split"},"inputs":[`+x+`],"outputs":[{"name":"parts"}]}`)
	if status != 200 {
		t.Fatalf("split: %d %s", status, b)
	}
	var resp oip.InferenceResponse
	if err := json.Unmarshal(b, &resp); err != nil {
		t.Fatal(err)
	}
	if len(resp.Outputs) != 2 || resp.Outputs[0].Name != "parts.0" || resp.Outputs[1].Name != "parts.1" ||
		!slicesEqual(resp.Outputs[0].Shape, []int64{1, 3}) || !slicesEqual(resp.Outputs[1].Shape, []int64{1, 3}) ||
		resp.Outputs[0].Datatype != oip.FP32 || string(resp.Outputs[1].Data) != "[8,10,12]" {
		t.Errorf("split's outputs: %s", b)
	}
	if n, _, _ := resp.Parameters.IntParam("parts.count"); n != 2 {
		t.Errorf("parts.count: %s", b)
	}

	status, _, b = call(t, "POST", infer, `{"parameters":{"task":"pyramid"},"inputs":[{"name":"x","datatype":"FP32","shape":[0,3],"data":[]}]}`)
	if status != 200 || !strings.Contains(string(b), `"outputs":[]`) || !strings.Contains(string(b), `"levels.count":0`) {
		t.Errorf("an empty pyramid: %d %s", status, b)
	}

	status, _, b = call(t, "POST", infer, `{"parameters":{"task":"split"},"inputs":[`+x+`],"outputs":[{"name":"parts.0"}]}`)
	if status != 400 || !strings.Contains(errorBody(t, b), `output "parts.0" is not an artifact of task "split" (artifacts: total, parts)`) {
		t.Errorf("an element as an output filter: %d %s", status, b)
	}

	status, _, b = call(t, "GET", s.url+"/v2/models/golden-structured", "")
	var md oip.ModelMetadata
	if status != 200 || json.Unmarshal(b, &md) != nil {
		t.Fatalf("metadata: %d %s", status, b)
	}
	var tasks map[string]struct {
		Outputs []oip.TensorMetadata `json:"outputs"`
	}
	if err := json.Unmarshal([]byte(md.Parameters["tasks"].(string)), &tasks); err != nil {
		t.Fatal(err)
	}
	parts := tasks["split"].Outputs[1]
	if parts.Name != "parts" || parts.Datatype != oip.FP32 || !slicesEqual(parts.Shape, []int64{-1, -1}) ||
		parts.Parameters["kind"] != "tensor_list" || parts.Parameters["elements"] != "parts.0, parts.1, ..." ||
		parts.Parameters["count_parameter"] != "parts.count" {
		t.Errorf("split's parts in the metadata: %+v", parts)
	}
}
