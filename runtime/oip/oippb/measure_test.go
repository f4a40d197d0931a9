package oippb_test

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/oip"
	"github.com/worldfoundry/wfgen/runtime/oip/oippb"
)

// wire is m's wire bytes.
func wire(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Protobuf's small fields become large Go values: 4 M empty inputs entries
// of an 8 MB message took 306 MB to decode. Too many inputs or outputs are
// refused before decoding; whatever else is told to Limits.Reserve first,
// and decoding allocates no more than that and the message's own bytes.
func TestUnmarshalCountsBeforeDecoding(t *testing.T) {
	empty := &oippb.ModelInferRequest{ModelName: "m"}
	for range 200_000 {
		empty.Inputs = append(empty.Inputs, &oippb.ModelInferRequest_InferInputTensor{})
	}
	b := wire(t, empty)
	var err error
	n := enginetest.Allocated(func() { err = oippb.Unmarshal(b, &oippb.ModelInferRequest{}, oip.Limits{MaxInputs: 1024}) })
	if err == nil || !strings.Contains(err.Error(), "200000 inputs") {
		t.Fatalf("200,000 inputs: %v", err)
	}
	if n > uint64(len(b)) {
		t.Errorf("refusing 200,000 inputs allocated %d bytes, more than the %d-byte message", n, len(b))
	}
	if err := oippb.Unmarshal([]byte{0x2a, 0xff}, &oippb.ModelInferRequest{}, oip.Limits{}); err == nil || !strings.Contains(err.Error(), "malformed protobuf") {
		t.Errorf("a truncated message: %v", err)
	}

	params := map[string]*oippb.InferParameter{}
	for i := range 50_000 {
		params[strings.Repeat("k", 1+i%5)+string(rune('a'+i%26))+string(rune('a'+i/26%26))+string(rune('a'+i/676))] = &oippb.InferParameter{}
	}
	strs := make([][]byte, 200_000)
	outputs := make([]*oippb.ModelInferRequest_InferRequestedOutputTensor, 100_000)
	for i := range outputs {
		outputs[i] = &oippb.ModelInferRequest_InferRequestedOutputTensor{}
	}
	for name, m := range map[string]*oippb.ModelInferRequest{
		"empty inputs": empty,
		"parameters":   {Parameters: params},
		"empty strings": {Inputs: []*oippb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "BYTES",
			Contents: &oippb.InferTensorContents{BytesContents: strs}}}},
		"small ints": {Inputs: []*oippb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "INT64",
			Shape: make([]int64, 100_000), Contents: &oippb.InferTensorContents{Int64Contents: make([]int64, 500_000)}}}},
		"outputs":      {Outputs: outputs},
		"raw contents": {RawInputContents: strs},
	} {
		b := wire(t, m)
		var reserved int64
		lim := oip.Limits{Reserve: func(n int64) error { reserved += n; return nil }}
		n := enginetest.Allocated(func() {
			if err := oippb.Unmarshal(b, &oippb.ModelInferRequest{}, lim); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		})
		if bound := uint64(reserved) + uint64(len(b)); n > bound {
			t.Errorf("%s (%d-byte message): decoding allocated %d bytes, more than the %d reserved and the message's bytes", name, len(b), n, reserved)
		}
		t.Logf("%s: message %d, reserved %d, allocated %d", name, len(b), reserved, n)
	}
}
