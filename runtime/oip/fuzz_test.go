package oip_test

import (
	"errors"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/oip"
)

// FuzzDecodeRequest feeds arbitrary bodies to the request decoder and maps
// what decodes onto every task of the demo families, as the server does.
// Nothing may panic, and every error must be a protocol error (matching
// oip.ErrBadRequest), never an internal one. The kept corpus is in
// testdata/fuzz/FuzzDecodeRequest.
func FuzzDecodeRequest(f *testing.F) {
	models := []*oip.Model{loadModel(f, "tiny-encoder"), loadModel(f, "tiny-world"), partsModel(f)}
	for _, s := range []string{
		// a dict's and a tuple's parts (partsModel; parts.go)
		`{"inputs":[{"name":"features.a","datatype":"FP32","shape":[1,2],"data":[1,2]},{"name":"pair.0","datatype":"INT64","shape":[1],"data":[3]},{"name":"pair.1","datatype":"FP32","shape":[1],"data":[4]}]}`,
		`{"inputs":[{"name":"features","datatype":"FP32","shape":[1],"data":[1]},{"name":"features.a.b","datatype":"FP32","shape":[1],"data":[1]},{"name":"pair.01","datatype":"FP32","shape":[1],"data":[1]}]}`,
		`{"inputs":[{"name":"features.b","datatype":"BOOL","shape":[1],"data":[true]},{"name":"features.b","datatype":"BOOL","shape":[1],"data":[true]},{"name":"pair.","datatype":"FP32","shape":[0],"data":[]}]}`,
		`{"inputs":[{"name":"tokens","datatype":"INT64","shape":[2,3],"data":[[1,2,3],[4,5,6]]}]}`,
		`{"id":"x","parameters":{"task":"generate"},"inputs":[{"name":"prompt","datatype":"BYTES","shape":[1],"data":["hi"]},{"name":"seed","datatype":"INT32","shape":[],"data":[7]}],"outputs":[{"name":"video"}]}`,
		`{"parameters":{"task":"step"},"inputs":[{"name":"speed","datatype":"FP32","shape":[1],"data":["NaN"]}]}`,
		`{"inputs":[{"name":"tokens","datatype":"BF16","shape":[0],"data":[]}]}`,
		`{"inputs":[{"name":"tokens","datatype":"BOOL","shape":[2,0],"data":[[],[]]}]}`,
		`{"inputs":[{"name":"tokens","datatype":"UINT64","shape":[1],"data":[18446744073709551615]}]}`,
		`{"inputs":[{"name":"prompt","datatype":"BYTES","shape":[1],"data":["\u00e9\"]\\["]}]}`,
		`{"inputs":[]}`, `{}`, `null`, `[`, `{"inputs":[{"name":"tokens","datatype":"FP16","shape":[1],"data":[1e400]}]}`,
	} {
		f.Add([]byte(s))
	}
	lim := oip.Limits{MaxTensorBytes: 1 << 16, MaxInputs: 64}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := oip.DecodeRequest(body, lim)
		if err != nil {
			if !errors.Is(err, oip.ErrBadRequest) {
				t.Fatalf("decode error %v is not a protocol error", err)
			}
			return
		}
		for _, m := range models {
			for i := range m.Spec.Tasks {
				task := &m.Spec.Tasks[i]
				if _, _, err := m.Args(task, req.Inputs, lim); err != nil && !errors.Is(err, oip.ErrBadRequest) {
					t.Fatalf("%s %s: error %v is not a protocol error", m.Spec.ModelFamilyID, task.TaskID, err)
				}
				if err := oip.CheckOutputs(task, req.Outputs); err != nil && !errors.Is(err, oip.ErrBadRequest) {
					t.Fatalf("outputs: %v", err)
				}
			}
			if _, err := m.Task(req.Parameters); err != nil && !errors.Is(err, oip.ErrBadRequest) {
				t.Fatalf("task: %v", err)
			}
			if _, err := m.Variant("", req.Parameters); err != nil && !errors.Is(err, oip.ErrBadRequest) {
				t.Fatalf("variant: %v", err)
			}
		}
	})
}
