package remote_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/oip"
	"github.com/worldfoundry/wfgen/runtime/remote"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// TestRunBinaryTensors runs against a minimal server of the binary tensor
// data extension: the client sends its tensor input binary after the JSON
// part (scalars stay JSON) and asks for every output binary; the server's
// binary outputs, a tensor and a text, decode to the values sent, and an
// answer whose sizes do not add up is an error.
func TestRunBinaryTensors(t *testing.T) {
	var got *oip.InferenceRequest
	var header http.Header
	malformed := false
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		header = r.Header.Clone()
		body, _ := io.ReadAll(r.Body)
		n, err := oip.ParseHeaderLength(r.Header.Get(oip.HeaderContentLength))
		if err == nil {
			got, err = oip.DecodeBinaryRequest(body, n, oip.Limits{})
		}
		if err != nil {
			w.WriteHeader(400)
			io.WriteString(w, `{"error":"`+err.Error()+`"}`)
			return
		}
		emb := binary.LittleEndian.AppendUint32(nil, math.Float32bits(0.25))
		emb = binary.LittleEndian.AppendUint32(emb, math.Float32bits(float32(math.NaN())))
		note := append(binary.LittleEndian.AppendUint32(nil, 2), "ok"...)
		js := `{"model_name":"enc","outputs":[` +
			`{"name":"embedding","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":8}},` +
			`{"name":"note","datatype":"BYTES","shape":[1],"parameters":{"binary_data_size":6}}]}`
		tail := append(emb, note...)
		if malformed {
			tail = tail[:10]
		}
		w.Header().Set("Content-Type", oip.BinaryContentType)
		w.Header().Set(oip.HeaderContentLength, strconv.Itoa(len(js)))
		w.Write(append([]byte(js), tail...))
	}))
	defer hs.Close()
	rc, err := remote.New(encoderSpec(), hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	tokens := tensor.FromInt64([]int64{4, 5, -6}, 3)
	out, err := rc.Run(context.Background(), "embed", map[string]any{"tokens": tokens, "tag": "x"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if header.Get("Content-Type") != oip.BinaryContentType || got.Parameters[oip.BinaryDataOutput] != true {
		t.Errorf("request headers %v, parameters %v", header, got.Parameters)
	}
	if in := got.Inputs[0]; in.Name != "tokens" || !in.IsBinary() || !bytes.Equal(in.Raw, tokens.Data) || in.Data != nil {
		t.Errorf("tokens input %+v", in)
	}
	if in := got.Inputs[1]; in.Name != "tag" || in.IsBinary() || string(in.Data) != `["x"]` {
		t.Errorf("tag input %+v", in)
	}
	emb := out["embedding"].(*tensor.Tensor)
	if v, _ := emb.Float32s(); len(v) != 2 || v[0] != 0.25 || v[1] == v[1] || out["note"] != "ok" {
		t.Errorf("outputs %v %v", v, out)
	}
	malformed = true
	if _, err := rc.Run(context.Background(), "embed", map[string]any{"tokens": tokens}, nil); err == nil || !strings.Contains(err.Error(), "malformed answer") || !strings.Contains(err.Error(), `output "note": binary_data_size 6 runs past the body`) {
		t.Errorf("malformed binary answer: %v", err)
	}
}
