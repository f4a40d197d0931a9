package serve_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/worldfoundry/wfgen/runtime/oip"
	"github.com/worldfoundry/wfgen/runtime/oip/oippb"
	"github.com/worldfoundry/wfgen/runtime/serve"
	"github.com/worldfoundry/wfgen/runtime/stream"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// TestGrpcStreamAppliesControls runs a realtime session on the
// bidirectional RPC: its chunks are the in-process stream's, bit for bit,
// with controls sent after chunk 1 was taken applied from chunk 2 (the
// session in lockstep, as the remote client runs it); controls are
// answered with the controls in effect, a refused one with its error, and
// the session goes on; it ends OK after max_chunks.
func TestGrpcStreamAppliesControls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := withGRPC(t, start(t, serve.Config{}))
	const n = 5
	worldIn := inProcess(t, "tiny-world")
	sess, err := worldIn.Stream(ctx, "step", map[string]any{"speed": 3.0}, stream.WithPacing(false), stream.WithMaxChunks(n), stream.WithControls(stream.Controls{"right": 1}))
	if err != nil {
		t.Fatal(err)
	}
	want := streamFrames(t, sess, ctx, func(i int) {
		if i == 1 {
			sess.SetControls(stream.Controls{"forward": 1, "right": 0})
		}
	})

	st, err := s.rt.ModelStreamInfer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	param := func(v any) *oippb.InferParameter {
		switch x := v.(type) {
		case bool:
			return &oippb.InferParameter{ParameterChoice: &oippb.InferParameter_BoolParam{BoolParam: x}}
		case int64:
			return &oippb.InferParameter{ParameterChoice: &oippb.InferParameter_Int64Param{Int64Param: x}}
		}
		return &oippb.InferParameter{ParameterChoice: &oippb.InferParameter_StringParam{StringParam: v.(string)}}
	}
	speed := make([]byte, 4)
	binary.LittleEndian.PutUint32(speed, math.Float32bits(3))
	err = st.Send(&oippb.ModelStreamInferRequest{Message: &oippb.ModelStreamInferRequest_Start{Start: &oippb.ModelInferRequest{
		ModelName: "tiny-world",
		Parameters: map[string]*oippb.InferParameter{"task": param("step"), "paced": param(false), "max_chunks": param(int64(n)),
			"lockstep": param(true), "controls": param(`{"right":1}`)},
		Inputs:           []*oippb.ModelInferRequest_InferInputTensor{{Name: "speed", Datatype: "FP32", Shape: []int64{1}}},
		RawInputContents: [][]byte{speed},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	first, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	info := first.GetSession()
	var rt map[string]any
	if info == nil || len(info.Id) != 32 || json.Unmarshal([]byte(info.Realtime), &rt) != nil || rt["fps"] != 8.0 {
		t.Fatalf("first message: %v", first)
	}
	ack := func(i int64) *oippb.ModelStreamInferRequest {
		return &oippb.ModelStreamInferRequest{Message: &oippb.ModelStreamInferRequest_Controls{Controls: &oippb.SessionControls{Ack: &i}}}
	}
	var got []*tensor.Tensor
	refused := ""
	var answered map[string]float64
	for {
		msg, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("after %d chunks: %v", len(got), err)
		}
		if e := msg.GetErrorMessage(); e != "" {
			refused = e
			continue
		}
		if c := msg.GetControls(); c != nil {
			answered = c.Controls
			continue
		}
		c := msg.GetChunk()
		if c == nil || len(c.Outputs) != 1 || c.Outputs[0].Name != "frames" || c.Parameters[oip.ChunkIndex].GetInt64Param() != int64(len(got)) {
			t.Fatalf("chunk %d: %v", len(got), msg)
		}
		dt, _ := oip.Datatype(c.Outputs[0].Datatype).DType()
		got = append(got, &tensor.Tensor{DType: dt, Shape: c.Outputs[0].Shape, Data: c.RawOutputContents[0]})
		i := int64(len(got) - 1)
		if i == 1 {
			// New controls from the next chunk, and a refused one.
			if err := st.Send(&oippb.ModelStreamInferRequest{Message: &oippb.ModelStreamInferRequest_Controls{Controls: &oippb.SessionControls{Controls: map[string]float64{"forward": 1, "right": 0}}}}); err != nil {
				t.Fatal(err)
			}
			if err := st.Send(&oippb.ModelStreamInferRequest{Message: &oippb.ModelStreamInferRequest_Controls{Controls: &oippb.SessionControls{Controls: map[string]float64{"jump": 1}}}}); err != nil {
				t.Fatal(err)
			}
		}
		// After the last chunk the server ends the stream: Send says io.EOF
		// (and Recv gives the status).
		if err := st.Send(ack(i)); err != nil && !errors.Is(err, io.EOF) {
			t.Fatal(err)
		}
	}
	if len(got) != n {
		t.Fatalf("%d chunks, want %d", len(got), n)
	}
	for i := range want {
		if !tensorsEqual(want[i], got[i]) {
			t.Errorf("chunk %d differs from the in-process stream whose controls switched at chunk 2", i)
		}
	}
	if answered["forward"] != 1 || answered["right"] != 0 {
		t.Errorf("the controls answer: %v", answered)
	}
	if !strings.Contains(refused, `unknown control "jump"`) {
		t.Errorf("refused control: %q", refused)
	}
}

// TestGrpcStreamRefusals checks a session's refusals: a first message
// that is not start, a task that does not stream, an unknown model.
func TestGrpcStreamRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := withGRPC(t, start(t, serve.Config{}))
	for _, c := range []struct {
		name string
		msg  *oippb.ModelStreamInferRequest
		code codes.Code
		want string
	}{
		{"controls first", &oippb.ModelStreamInferRequest{Message: &oippb.ModelStreamInferRequest_Controls{Controls: &oippb.SessionControls{}}}, codes.InvalidArgument, "first message must be start"},
		{"not streaming", &oippb.ModelStreamInferRequest{Message: &oippb.ModelStreamInferRequest_Start{Start: embedRequest(1, 2)}}, codes.InvalidArgument, "not a streaming task"},
		{"unknown model", &oippb.ModelStreamInferRequest{Message: &oippb.ModelStreamInferRequest_Start{Start: &oippb.ModelInferRequest{ModelName: "nope"}}}, codes.NotFound, "nope"},
	} {
		st, err := s.rt.ModelStreamInfer(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Send(c.msg); err != nil {
			t.Fatal(err)
		}
		_, err = st.Recv()
		if code(err) != c.code || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}
