package remote_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/worldfoundry/wfgen/runtime/oip"
	"github.com/worldfoundry/wfgen/runtime/remote"
	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// scalerSpec is a family with one task: y = x * factor.
func scalerSpec() *spec.ModelInferenceSpec {
	return &spec.ModelInferenceSpec{
		ModelFamilyID: "scaler", DefaultVariantID: "v1", DefaultTaskID: "scale",
		Variants: []spec.InferenceVariantSpec{{VariantID: "v1"}},
		Tasks: []spec.InferenceTaskProfile{{
			TaskID: "scale",
			Inputs: []spec.InferenceFieldSpec{
				{FieldID: "x", Kind: spec.KindTensor, DType: tensor.Float32, Required: true},
				{FieldID: "factor", Kind: spec.KindFloat, Default: 2.0},
			},
			Outputs: []spec.InferenceArtifactSpec{{ArtifactID: "y", Kind: spec.ArtifactTensor, Required: true}},
		}},
	}
}

// scalerServer is a minimal Open Inference Protocol server for the scaler
// family — any OIP server that serves the family's inputs works, wfserve
// among them. It prints what it receives.
func scalerServer() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req oip.InferenceRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":"malformed request"}`)
			return
		}
		fmt.Println("server:", r.Method, r.URL.Path, "task", req.Parameters["task"])
		var x []float32
		factor := float32(1)
		for _, in := range req.Inputs {
			fmt.Printf("server: input %s %s %v %s\n", in.Name, in.Datatype, in.Shape, in.Data)
			switch in.Name {
			case "x":
				json.Unmarshal(in.Data, &x)
			case "factor":
				var f []float32
				json.Unmarshal(in.Data, &f)
				factor = f[0]
			}
		}
		if len(x) == 0 {
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":"x is empty"}`)
			return
		}
		y := make([]float32, len(x))
		for i := range x {
			y[i] = x[i] * factor
		}
		data, _ := json.Marshal(y)
		fmt.Fprintf(w, `{"model_name":"scaler","outputs":[{"name":"y","datatype":"FP32","shape":[%d],"data":%s}]}`, len(y), data)
	}))
}

// A remote client runs a family's tasks on a server and returns the
// outputs in the form the in-process client returns them: here the
// tensor artifact y as a *tensor.Tensor. A generated package's Client
// over it (client.Open[pkg.Client](remote.New(pkg.Spec(), url))) adds
// typed params and results.
func Example() {
	srv := scalerServer()
	defer srv.Close()

	rc, err := remote.New(scalerSpec(), srv.URL,
		remote.WithJSONTensors()) // this server does not take binary tensors
	if err != nil {
		fmt.Println(err)
		return
	}
	call := map[string]any{"x": tensor.FromFloat32([]float32{1, 2, 3}, 3), "factor": 0.5}
	out, err := rc.Run(context.Background(), "scale", call, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	y, _ := out["y"].(*tensor.Tensor).Float32s()
	fmt.Println("client: y =", y)
	// Output:
	// server: POST /v2/models/scaler/infer task scale
	// server: input x FP32 [3] [1,2,3]
	// server: input factor FP64 [1] [0.5]
	// client: y = [0.5 1 1.5]
}

// An error answer of the server is a *remote.StatusError with the HTTP
// status and the protocol error body's message; its text names the family
// and the task.
func ExampleStatusError() {
	srv := scalerServer()
	defer srv.Close()
	rc, err := remote.New(scalerSpec(), srv.URL, remote.WithJSONTensors())
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = rc.Run(context.Background(), "scale", map[string]any{"x": tensor.FromFloat32(nil, 0)}, nil)
	var se *remote.StatusError
	if errors.As(err, &se) {
		fmt.Println("status", se.Status, "message", se.Message)
	}
	fmt.Println(err)
	// Output:
	// server: POST /v2/models/scaler/infer task scale
	// server: input x FP32 [0] []
	// status 400 message x is empty
	// scaler scale (remote): server answered 400 Bad Request: x is empty
}
