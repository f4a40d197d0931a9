package oip

// The binary tensor data extension, as Triton defines it for the protocol's
// REST API and KServe v2 clients speak it (Triton's
// docs/protocol/extension_binary_data.md):
//
//   - A request or response body is the JSON inference request or response
//     followed by the binary data of its binary tensors, in the order the
//     JSON lists them, with nothing between them. The header
//     Inference-Header-Content-Length gives the length of the JSON part;
//     Content-Length stays the whole body's. Such bodies are sent as
//     application/octet-stream.
//   - A binary input or output has no "data"; its parameter
//     "binary_data_size" gives the length of its binary data.
//   - A requested output's parameter "binary_data" (a boolean) asks for it
//     binary or as JSON; the request parameter "binary_data_output" asks for
//     every output not so marked.
//   - Binary data are the elements in row-major order, little-endian, in
//     their datatype's size (BOOL: one byte, 0 or 1); a BYTES element is a
//     4-byte little-endian length followed by that many bytes.
//
// A raw binary request (Inference-Header-Content-Length: 0, no JSON part)
// is refused: the inputs' names and shapes are needed.

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/worldfoundry/wfgen/runtime/artifactio"

	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// Names of the binary tensor data extension.
const (
	// BinaryExtension is the extension's name in server metadata
	// (Triton's).
	BinaryExtension = "binary_tensor_data"
	// HeaderContentLength is the HTTP header giving the length of the JSON
	// part of a body that carries binary tensor data.
	HeaderContentLength = "Inference-Header-Content-Length"
	// BinaryContentType is the content type of a body that carries binary
	// tensor data.
	BinaryContentType = "application/octet-stream"
	// BinaryDataSize is the tensor parameter giving the length of a binary
	// input's or output's data.
	BinaryDataSize = "binary_data_size"
	// BinaryData is the requested output's parameter that asks for it
	// binary (true) or as JSON (false).
	BinaryData = "binary_data"
	// BinaryDataOutput is the request parameter that asks for every output
	// binary, unless the output's own BinaryData says otherwise.
	BinaryDataOutput = "binary_data_output"
)

// IsBinary reports whether t travels binary: its parameters give
// binary_data_size.
func (t *Tensor) IsBinary() bool {
	_, ok := t.Parameters[BinaryDataSize]
	return ok
}

// ParseHeaderLength parses an Inference-Header-Content-Length header. A
// value that is not a length in bytes matches ErrBadRequest.
func ParseHeaderLength(v string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 {
		return 0, bad("header %s: %q is not a length in bytes", HeaderContentLength, v)
	}
	return n, nil
}

// DecodeBinaryRequest decodes an infer request body of the binary tensor
// data extension: headerLen bytes of JSON (the Inference-Header-Content-Length
// header), then the binary data of its binary inputs, in order. Each binary
// input's Raw is its data (sharing body). Besides DecodeRequest's checks, a
// header length past the body, a binary input that also has data, sizes
// that run past the body or leave bytes over, and a binary_data_size that
// does not fit the input's shape and datatype are errors matching
// ErrBadRequest, naming the input. It never panics.
func DecodeBinaryRequest(body []byte, headerLen int64, lim Limits) (*InferenceRequest, error) {
	switch {
	case headerLen == 0:
		return nil, bad("%s is 0, a raw binary request without the JSON inference request: it is not supported; send the JSON request first and give its length", HeaderContentLength)
	case headerLen < 0 || headerLen > int64(len(body)):
		return nil, bad("%s is %d, past the end of the %d-byte body", HeaderContentLength, headerLen, len(body))
	}
	req, err := decodeRequest(body[:headerLen], lim, true)
	if err != nil {
		return nil, err
	}
	rest := body[headerLen:]
	var off int64
	for i := range req.Inputs {
		in := &req.Inputs[i]
		if !in.IsBinary() {
			continue
		}
		size, _ := binarySize(in) // checked by decodeRequest
		if left := int64(len(rest)) - off; size > left {
			return nil, bad("input %q: binary_data_size %d runs past the body: %d bytes of binary data are left for it (the JSON part is %d bytes, the binary inputs before it take %d)", in.Name, size, left, headerLen, off)
		}
		in.Raw = rest[off : off+size : off+size]
		off += size
		if err := checkRaw(in); err != nil {
			return nil, bad("input %q: %v", in.Name, err)
		}
	}
	if off != int64(len(rest)) {
		return nil, bad("the body has %d bytes after its %d-byte JSON part (%s), and the inputs' binary_data_size add up to %d", len(rest), headerLen, HeaderContentLength, off)
	}
	return req, nil
}

// checkData checks an input's data: a JSON array, or, for a binary input
// of a binary request, no data and a valid binary_data_size.
func checkData(in *Tensor, binaryBody bool) error {
	if in.IsBinary() {
		if !binaryBody {
			return bad("input %q: parameter %s says its data are binary, but the request has no %s header (the binary tensor data extension's length of the JSON part)", in.Name, BinaryDataSize, HeaderContentLength)
		}
		if d := bytes.TrimSpace(in.Data); len(d) > 0 && string(d) != "null" {
			return bad("input %q: it has both data and parameter %s; give one", in.Name, BinaryDataSize)
		}
		if _, err := binarySize(in); err != nil {
			return bad("input %q: %v", in.Name, err)
		}
		in.Data = nil
		return nil
	}
	if d := bytes.TrimSpace(in.Data); len(d) == 0 || d[0] != '[' {
		return bad("input %q: data must be a JSON array", in.Name)
	}
	return nil
}

// binarySize returns a tensor's binary_data_size.
func binarySize(t *Tensor) (int64, error) {
	v := t.Parameters[BinaryDataSize]
	var n int64
	ok := false
	switch x := v.(type) {
	case json.Number:
		var err error
		n, err = strconv.ParseInt(string(x), 10, 64)
		ok = err == nil
	case float64:
		n, ok = int64(x), x == math.Trunc(x) && math.Abs(x) < 1<<53
	case int64:
		n, ok = x, true
	case int:
		n, ok = int64(x), true
	}
	if !ok || n < 0 {
		return 0, fmt.Errorf("parameter %s must be a whole number of bytes, 0 or more, got %s", BinaryDataSize, jsonPhrase(v))
	}
	return n, nil
}

// checkRaw checks that a binary tensor's data fit its shape and datatype.
func checkRaw(t *Tensor) error {
	n, err := elements(t.Shape)
	if err != nil {
		return err
	}
	if t.Datatype == Bytes {
		return walkBytes(t.Raw, n, nil)
	}
	size := int64(t.Datatype.Size())
	if want := n * size; int64(len(t.Raw)) != want {
		return fmt.Errorf("binary_data_size %d, but %s%v takes %d bytes (%d elements of %d)", len(t.Raw), t.Datatype, t.Shape, want, n, size)
	}
	return nil
}

// walkBytes calls fn (when not nil) with each of the n BYTES elements of
// raw, and checks that they fill raw exactly.
func walkBytes(raw []byte, n int64, fn func(i int64, b []byte) error) error {
	if n > int64(len(raw))/4 {
		return fmt.Errorf("binary_data_size %d cannot hold %d BYTES elements (each takes a 4-byte length and its bytes)", len(raw), n)
	}
	off := 0
	for i := range n {
		if len(raw)-off < 4 {
			return fmt.Errorf("BYTES element %d: its 4-byte length runs past the binary data (%d bytes)", i, len(raw))
		}
		l := int64(binary.LittleEndian.Uint32(raw[off:]))
		off += 4
		if l > int64(len(raw)-off) {
			return fmt.Errorf("BYTES element %d is %d bytes long, and %d bytes of the binary data are left", i, l, len(raw)-off)
		}
		if fn != nil {
			if err := fn(i, raw[off:off+int(l)]); err != nil {
				return err
			}
		}
		off += int(l)
	}
	if off != len(raw) {
		return fmt.Errorf("binary_data_size %d, but its %d BYTES elements take %d bytes", len(raw), n, off)
	}
	return nil
}

// rawTensor returns a binary tensor's data as a runtime tensor of dtype
// (its own copy); size is what its shape takes.
func rawTensor(t *Tensor, dtype tensor.DType, size int64) (*tensor.Tensor, error) {
	if int64(len(t.Raw)) != size {
		return nil, fmt.Errorf("binary_data_size %d, but %s%v takes %d bytes", len(t.Raw), t.Datatype, t.Shape, size)
	}
	if dtype == tensor.Bool {
		for i, b := range t.Raw {
			if b > 1 {
				return nil, fmt.Errorf("BOOL element %d is %d (binary BOOL elements are 0 or 1)", i, b)
			}
		}
	}
	data := make([]byte, size)
	copy(data, t.Raw)
	return &tensor.Tensor{DType: dtype, Shape: append([]int64{}, t.Shape...), Data: data}, nil
}

// rawValues returns the n elements of a binary input of a scalar or list
// field, in the Go form decodeField's parsers give: string, int64,
// float64 or bool.
func rawValues(t *Tensor, n int64) ([]any, error) {
	if err := checkRaw(t); err != nil {
		return nil, err
	}
	vals := make([]any, 0, n)
	if t.Datatype == Bytes {
		err := walkBytes(t.Raw, n, func(i int64, b []byte) error {
			if !utf8.Valid(b) {
				return fmt.Errorf("element %d is not UTF-8 text", i)
			}
			vals = append(vals, string(b))
			return nil
		})
		return vals, err
	}
	size := t.Datatype.Size()
	for i := range int(n) {
		b := t.Raw[i*size:]
		var v any
		switch t.Datatype {
		case Bool:
			if b[0] > 1 {
				return nil, fmt.Errorf("element %d is %d (binary BOOL elements are 0 or 1)", i, b[0])
			}
			v = b[0] == 1
		case Int8:
			v = int64(int8(b[0]))
		case Uint8:
			v = int64(b[0])
		case Int16:
			v = int64(int16(binary.LittleEndian.Uint16(b)))
		case Uint16:
			v = int64(binary.LittleEndian.Uint16(b))
		case Int32:
			v = int64(int32(binary.LittleEndian.Uint32(b)))
		case Uint32:
			v = int64(binary.LittleEndian.Uint32(b))
		case Int64:
			v = int64(binary.LittleEndian.Uint64(b))
		case Uint64:
			u := binary.LittleEndian.Uint64(b)
			if u > math.MaxInt64 {
				return nil, fmt.Errorf("element %d (%d) is above the int64 range", i, u)
			}
			v = int64(u)
		case FP16:
			v = float64(artifactio.Float16ToFloat32(binary.LittleEndian.Uint16(b)))
		case BF16:
			v = float64(artifactio.BFloat16ToFloat32(binary.LittleEndian.Uint16(b)))
		case FP32:
			v = float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
		case FP64:
			v = math.Float64frombits(binary.LittleEndian.Uint64(b))
		default:
			return nil, fmt.Errorf("datatype %s has no binary form", t.Datatype)
		}
		vals = append(vals, v)
	}
	return vals, nil
}

// rawString returns the one BYTES element of a binary output.
func rawString(t *Tensor) (string, error) {
	var s string
	err := walkBytes(t.Raw, 1, func(_ int64, b []byte) error { s = string(b); return nil })
	return s, err
}

// binaryTensor returns the named binary tensor holding t; its Raw shares
// t's data.
func binaryTensor(name string, t *tensor.Tensor) (Tensor, error) {
	if err := t.Check(); err != nil {
		return Tensor{}, err
	}
	dt, ok := DatatypeOf(t.DType)
	if !ok {
		return Tensor{}, fmt.Errorf("dtype %s has no OIP datatype", t.DType)
	}
	raw := t.Data[:len(t.Data):len(t.Data)]
	if raw == nil {
		raw = []byte{}
	}
	return Tensor{Name: name, Datatype: dt, Shape: append([]int64{}, t.Shape...),
		Parameters: Parameters{BinaryDataSize: int64(len(raw))}, Raw: raw}, nil
}

// binaryString returns the named BYTES [1] binary tensor holding s.
func binaryString(name, s string) Tensor {
	raw := binary.LittleEndian.AppendUint32(make([]byte, 0, 4+len(s)), uint32(len(s)))
	raw = append(raw, s...)
	return Tensor{Name: name, Datatype: Bytes, Shape: []int64{1}, Parameters: Parameters{BinaryDataSize: int64(len(raw))}, Raw: raw}
}

// rawArtifact encodes one artifact value as a binary output.
func rawArtifact(a *spec.InferenceArtifactSpec, v any) (Tensor, error) {
	switch a.Kind.Holds() {
	case spec.HoldsText:
		s, err := tensor.AsText(v)
		if err != nil {
			return Tensor{}, err
		}
		return binaryString(a.ArtifactID, s), nil
	case spec.HoldsJSON:
		raw, err := tensor.AsJSON(v)
		if err != nil {
			return Tensor{}, err
		}
		return binaryString(a.ArtifactID, string(raw)), nil
	}
	t, err := tensor.AsTensor(v)
	if err != nil {
		return Tensor{}, err
	}
	return binaryTensor(a.ArtifactID, t)
}

// EncodeInputsBinary is EncodeInputs with the tensor, image, video and
// tensor_list fields as binary inputs (their Raw shares the kwargs'
// tensor data); scalar and list fields stay JSON.
func EncodeInputsBinary(task *spec.InferenceTaskProfile, call, load map[string]any) ([]Tensor, error) {
	return encodeInputs(task, call, load, binaryTensor)
}

// BinaryOutputs returns which outputs of the answer to req travel binary:
// an output's parameter binary_data when it gives one, else the request
// parameter binary_data_output. It is nil when none does. A parameter that
// is not a boolean matches ErrBadRequest.
func BinaryOutputs(req *InferenceRequest) (func(name string) bool, error) {
	all, _, err := req.Parameters.BoolParam(BinaryDataOutput)
	if err != nil {
		return nil, err
	}
	var own map[string]bool
	some := all
	for _, o := range req.Outputs {
		b, ok, err := o.Parameters.BoolParam(BinaryData)
		if err != nil {
			return nil, bad("output %q: %v", o.Name, err)
		}
		if ok {
			if own == nil {
				own = map[string]bool{}
			}
			own[o.Name] = b
			some = some || b
		}
	}
	if !some {
		return nil, nil
	}
	return func(name string) bool {
		if b, ok := own[name]; ok {
			return b
		}
		return all
	}, nil
}

// EncodeBody returns the body of r: its JSON and, when inputs travel
// binary, their data in order, to follow the JSON (whose length goes in
// Inference-Header-Content-Length). data is nil when no input does.
func (r *InferenceRequest) EncodeBody() (header []byte, data [][]byte, err error) {
	header, err = json.Marshal(r)
	if err != nil {
		return nil, nil, err
	}
	return header, rawParts(r.Inputs), nil
}

// EncodeBody returns the body of r: its JSON (AppendJSON) and, when outputs
// travel binary, their data in order, to follow the JSON (whose length goes
// in Inference-Header-Content-Length). data is nil when no output does.
func (r *InferenceResponse) EncodeBody() (header []byte, data [][]byte, err error) {
	header, err = r.AppendJSON(nil)
	if err != nil {
		return nil, nil, err
	}
	return header, rawParts(r.Outputs), nil
}

func rawParts(ts []Tensor) [][]byte {
	var data [][]byte
	for i := range ts {
		if ts[i].IsBinary() {
			if data == nil {
				data = make([][]byte, 0, len(ts)-i)
			}
			data = append(data, ts[i].Raw)
		}
	}
	return data
}

// DecodeBinaryResponse decodes an infer response body of the binary tensor
// data extension: headerLen bytes of JSON, then the binary data of its
// binary outputs, in order (each binary output's Raw shares body).
func DecodeBinaryResponse(body []byte, headerLen int64) (*InferenceResponse, error) {
	if headerLen < 0 || headerLen > int64(len(body)) {
		return nil, fmt.Errorf("%s is %d, past the end of the %d-byte body", HeaderContentLength, headerLen, len(body))
	}
	var resp InferenceResponse
	if err := json.Unmarshal(body[:headerLen], &resp); err != nil {
		return nil, fmt.Errorf("the JSON part of the response: %w", err)
	}
	rest := body[headerLen:]
	var off int64
	for i := range resp.Outputs {
		o := &resp.Outputs[i]
		if !o.IsBinary() {
			continue
		}
		size, err := binarySize(o)
		if err != nil {
			return nil, fmt.Errorf("output %q: %w", o.Name, err)
		}
		if size > int64(len(rest))-off {
			return nil, fmt.Errorf("output %q: binary_data_size %d runs past the body (%d bytes left)", o.Name, size, int64(len(rest))-off)
		}
		o.Raw = rest[off : off+size : off+size]
		off += size
	}
	if off != int64(len(rest)) {
		return nil, errors.New("the response has more binary data than its outputs' binary_data_size add up to")
	}
	return &resp, nil
}
