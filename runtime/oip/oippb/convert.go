package oippb

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/worldfoundry/wfgen/runtime/oip"
)

// The conversions between the gRPC messages and package oip's request and
// response types, so that a request over gRPC runs through the same
// decoding, checks and encoding as one over REST. Tensor data travel raw
// (raw_input_contents, raw_output_contents), in the form of the binary
// tensor data extension; typed contents (InferTensorContents) are accepted
// in requests and answers too, and turned into that form.

// Request returns the oip request a ModelInferRequest carries, checked
// with oip.CheckRawRequest against lim: every input's elements in its Raw,
// from raw_input_contents or from its typed contents (never both). Errors
// match oip.ErrBadRequest.
func Request(r *ModelInferRequest, lim oip.Limits) (*oip.InferenceRequest, error) {
	req := &oip.InferenceRequest{ID: r.GetId(), Parameters: Parameters(r.GetParameters())}
	raw := r.GetRawInputContents()
	if len(raw) > 0 && len(raw) != len(r.GetInputs()) {
		return nil, bad("raw_input_contents has %d entries and inputs %d: give one per input, in order", len(raw), len(r.GetInputs()))
	}
	if lim.MaxInputs > 0 && len(r.GetInputs()) > lim.MaxInputs {
		return nil, bad("the request has %d inputs, at most %d are allowed", len(r.GetInputs()), lim.MaxInputs)
	}
	req.Inputs = make([]oip.Tensor, len(r.GetInputs()))
	for i, in := range r.GetInputs() {
		t := oip.Tensor{Name: in.GetName(), Datatype: oip.Datatype(in.GetDatatype()), Shape: in.GetShape(), Parameters: Parameters(in.GetParameters())}
		if t.Shape == nil {
			t.Shape = []int64{} // a scalar: the protocol's messages cannot tell [] from no shape
		}
		switch {
		case len(raw) > 0:
			if in.GetContents() != nil {
				return nil, bad("input %q: it has contents, and the request raw_input_contents; give one", t.Name)
			}
			t.Raw = raw[i]
		default:
			b, err := contentsRaw(t.Datatype, in.GetContents())
			if err != nil {
				return nil, bad("input %q: %v", t.Name, err)
			}
			t.Raw = b
		}
		req.Inputs[i] = t
	}
	for _, o := range r.GetOutputs() {
		req.Outputs = append(req.Outputs, oip.RequestOutput{Name: o.GetName(), Parameters: Parameters(o.GetParameters())})
	}
	if err := oip.CheckRawRequest(req, lim); err != nil {
		return nil, err
	}
	return req, nil
}

// badRequest is an error a request's content causes.
type badRequest struct{ msg string }

func (e *badRequest) Error() string        { return e.msg }
func (e *badRequest) Is(target error) bool { return target == oip.ErrBadRequest }

func bad(format string, args ...any) error { return &badRequest{fmt.Sprintf(format, args...)} }

// contentsRaw returns typed contents in the raw form: row-major,
// little-endian, BYTES elements each a 4-byte length and its bytes. The
// contents must be in the field of the datatype (int_contents for INT8,
// INT16 and INT32...); FP16 and BF16 have none and travel raw.
func contentsRaw(d oip.Datatype, c *InferTensorContents) ([]byte, error) {
	field := contentsField(d)
	if field == "" {
		return nil, fmt.Errorf("datatype %s has no typed contents: send it in raw_input_contents", d)
	}
	if got := filled(c); len(got) > 1 || (len(got) == 1 && got[0] != field) {
		return nil, fmt.Errorf("datatype %s takes its elements in contents.%s, and the request fills %v", d, field, got)
	}
	var b []byte
	switch d {
	case oip.Bool:
		for _, v := range c.GetBoolContents() {
			if v {
				b = append(b, 1)
			} else {
				b = append(b, 0)
			}
		}
	case oip.Int8, oip.Int16, oip.Int32:
		size := d.Size()
		lo, hi := int64(-1)<<(8*size-1), int64(1)<<(8*size-1)-1
		for i, v := range c.GetIntContents() {
			if int64(v) < lo || int64(v) > hi {
				return nil, fmt.Errorf("element %d is %d, out of the range of %s", i, v, d)
			}
			b = appendInt(b, uint64(v), size)
		}
	case oip.Int64:
		for _, v := range c.GetInt64Contents() {
			b = binary.LittleEndian.AppendUint64(b, uint64(v))
		}
	case oip.Uint8, oip.Uint16, oip.Uint32:
		size := d.Size()
		for i, v := range c.GetUintContents() {
			if size < 4 && uint64(v) >= 1<<(8*size) {
				return nil, fmt.Errorf("element %d is %d, out of the range of %s", i, v, d)
			}
			b = appendInt(b, uint64(v), size)
		}
	case oip.Uint64:
		for _, v := range c.GetUint64Contents() {
			b = binary.LittleEndian.AppendUint64(b, v)
		}
	case oip.FP32:
		for _, v := range c.GetFp32Contents() {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
	case oip.FP64:
		for _, v := range c.GetFp64Contents() {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
		}
	case oip.Bytes:
		for _, v := range c.GetBytesContents() {
			b = binary.LittleEndian.AppendUint32(b, uint32(len(v)))
			b = append(b, v...)
		}
	}
	if b == nil {
		b = []byte{}
	}
	return b, nil
}

// appendInt appends the size low bytes of v, little-endian.
func appendInt(b []byte, v uint64, size int) []byte {
	for i := range size {
		b = append(b, byte(v>>(8*i)))
	}
	return b
}

// contentsField names the InferTensorContents field of a datatype ("" for
// FP16, BF16 and unknown ones).
func contentsField(d oip.Datatype) string {
	switch d {
	case oip.Bool:
		return "bool_contents"
	case oip.Int8, oip.Int16, oip.Int32:
		return "int_contents"
	case oip.Int64:
		return "int64_contents"
	case oip.Uint8, oip.Uint16, oip.Uint32:
		return "uint_contents"
	case oip.Uint64:
		return "uint64_contents"
	case oip.FP32:
		return "fp32_contents"
	case oip.FP64:
		return "fp64_contents"
	case oip.Bytes:
		return "bytes_contents"
	}
	return ""
}

// filled names the fields of c that hold elements.
func filled(c *InferTensorContents) []string {
	var out []string
	for _, f := range []struct {
		name string
		n    int
	}{
		{"bool_contents", len(c.GetBoolContents())}, {"int_contents", len(c.GetIntContents())},
		{"int64_contents", len(c.GetInt64Contents())}, {"uint_contents", len(c.GetUintContents())},
		{"uint64_contents", len(c.GetUint64Contents())}, {"fp32_contents", len(c.GetFp32Contents())},
		{"fp64_contents", len(c.GetFp64Contents())}, {"bytes_contents", len(c.GetBytesContents())},
	} {
		if f.n > 0 {
			out = append(out, f.name)
		}
	}
	return out
}

// Parameters returns the oip parameters of the protocol's parameter map:
// bool, string and double values as they are, int64 as int64, uint64 as
// int64 when it fits and as a json.Number otherwise.
func Parameters(p map[string]*InferParameter) oip.Parameters {
	if len(p) == 0 {
		return nil
	}
	out := make(oip.Parameters, len(p))
	for k, v := range p {
		switch x := v.GetParameterChoice().(type) {
		case *InferParameter_BoolParam:
			out[k] = x.BoolParam
		case *InferParameter_Int64Param:
			out[k] = x.Int64Param
		case *InferParameter_StringParam:
			out[k] = x.StringParam
		case *InferParameter_DoubleParam:
			out[k] = x.DoubleParam
		case *InferParameter_Uint64Param:
			if x.Uint64Param <= math.MaxInt64 {
				out[k] = int64(x.Uint64Param)
			} else {
				out[k] = json.Number(strconv.FormatUint(x.Uint64Param, 10))
			}
		default:
			out[k] = nil // a parameter without a value: as absent
		}
	}
	return out
}

// FromParameters returns the protocol's parameter map of oip parameters:
// bools, strings, integers and floats as such (a json.Number as an integer
// when it is one), anything else as its JSON text.
func FromParameters(p oip.Parameters) (map[string]*InferParameter, error) {
	if len(p) == 0 {
		return nil, nil
	}
	out := make(map[string]*InferParameter, len(p))
	for k, v := range p {
		var ip InferParameter
		switch x := v.(type) {
		case bool:
			ip.ParameterChoice = &InferParameter_BoolParam{BoolParam: x}
		case string:
			ip.ParameterChoice = &InferParameter_StringParam{StringParam: x}
		case int:
			ip.ParameterChoice = &InferParameter_Int64Param{Int64Param: int64(x)}
		case int64:
			ip.ParameterChoice = &InferParameter_Int64Param{Int64Param: x}
		case float64:
			ip.ParameterChoice = &InferParameter_DoubleParam{DoubleParam: x}
		case json.Number:
			if n, err := x.Int64(); err == nil {
				ip.ParameterChoice = &InferParameter_Int64Param{Int64Param: n}
			} else if f, err := x.Float64(); err == nil {
				ip.ParameterChoice = &InferParameter_DoubleParam{DoubleParam: f}
			} else {
				return nil, fmt.Errorf("parameter %q: %q is not a number", k, x)
			}
		default:
			b, err := json.Marshal(x)
			if err != nil {
				return nil, fmt.Errorf("parameter %q: %v", k, err)
			}
			ip.ParameterChoice = &InferParameter_StringParam{StringParam: string(b)}
		}
		out[k] = &ip
	}
	return out, nil
}

// Response returns the ModelInferResponse of an oip response whose
// outputs are binary (their elements in Raw, as oip.EncodeOutputsBinary
// gives them): each output's data in raw_output_contents, in order, and
// its parameters without binary_data_size.
func Response(r *oip.InferenceResponse) (*ModelInferResponse, error) {
	params, err := FromParameters(r.Parameters)
	if err != nil {
		return nil, err
	}
	out := &ModelInferResponse{ModelName: r.ModelName, ModelVersion: r.ModelVersion, Id: r.ID, Parameters: params,
		Outputs: make([]*ModelInferResponse_InferOutputTensor, len(r.Outputs)), RawOutputContents: make([][]byte, len(r.Outputs))}
	for i := range r.Outputs {
		t := &r.Outputs[i]
		if t.Raw == nil && t.Data != nil {
			return nil, fmt.Errorf("output %q is JSON data, not raw", t.Name)
		}
		tp, err := FromParameters(withoutSize(t.Parameters))
		if err != nil {
			return nil, fmt.Errorf("output %q: %w", t.Name, err)
		}
		out.Outputs[i] = &ModelInferResponse_InferOutputTensor{Name: t.Name, Datatype: string(t.Datatype), Shape: t.Shape, Parameters: tp}
		raw := t.Raw
		if raw == nil {
			raw = []byte{}
		}
		out.RawOutputContents[i] = raw
	}
	return out, nil
}

// NewRequest returns the ModelInferRequest of an oip request whose inputs
// are raw (oip.EncodeInputsRaw), to the model name and version ("": the
// server's default): each input's elements in raw_input_contents, in
// order.
func NewRequest(model, version string, req *oip.InferenceRequest) (*ModelInferRequest, error) {
	params, err := FromParameters(req.Parameters)
	if err != nil {
		return nil, err
	}
	out := &ModelInferRequest{ModelName: model, ModelVersion: version, Id: req.ID, Parameters: params,
		Inputs: make([]*ModelInferRequest_InferInputTensor, len(req.Inputs)), RawInputContents: make([][]byte, len(req.Inputs))}
	for i := range req.Inputs {
		t := &req.Inputs[i]
		if t.Raw == nil {
			return nil, fmt.Errorf("input %q is not raw", t.Name)
		}
		tp, err := FromParameters(withoutSize(t.Parameters))
		if err != nil {
			return nil, fmt.Errorf("input %q: %w", t.Name, err)
		}
		out.Inputs[i] = &ModelInferRequest_InferInputTensor{Name: t.Name, Datatype: string(t.Datatype), Shape: t.Shape, Parameters: tp}
		out.RawInputContents[i] = t.Raw
	}
	for _, o := range req.Outputs {
		op, err := FromParameters(o.Parameters)
		if err != nil {
			return nil, fmt.Errorf("output %q: %w", o.Name, err)
		}
		out.Outputs = append(out.Outputs, &ModelInferRequest_InferRequestedOutputTensor{Name: o.Name, Parameters: op})
	}
	return out, nil
}

// withoutSize returns p without binary_data_size (a copy when it has it).
func withoutSize(p oip.Parameters) oip.Parameters {
	if _, ok := p[oip.BinaryDataSize]; !ok {
		return p
	}
	q := make(oip.Parameters, len(p))
	for k, v := range p {
		if k != oip.BinaryDataSize {
			q[k] = v
		}
	}
	return q
}

// DecodeResponse returns the oip response a ModelInferResponse carries:
// each output binary (its Raw from raw_output_contents, or from its typed
// contents, and its binary_data_size parameter), as oip.DecodeOutputs
// takes it.
func DecodeResponse(r *ModelInferResponse) (*oip.InferenceResponse, error) {
	raw := r.GetRawOutputContents()
	if len(raw) > 0 && len(raw) != len(r.GetOutputs()) {
		return nil, fmt.Errorf("raw_output_contents has %d entries and outputs %d", len(raw), len(r.GetOutputs()))
	}
	out := &oip.InferenceResponse{ModelName: r.GetModelName(), ModelVersion: r.GetModelVersion(), ID: r.GetId(),
		Parameters: Parameters(r.GetParameters()), Outputs: make([]oip.Tensor, len(r.GetOutputs()))}
	for i, o := range r.GetOutputs() {
		t := oip.Tensor{Name: o.GetName(), Datatype: oip.Datatype(o.GetDatatype()), Shape: o.GetShape(), Parameters: Parameters(o.GetParameters())}
		if t.Shape == nil {
			t.Shape = []int64{}
		}
		if len(raw) > 0 {
			t.Raw = raw[i]
		} else {
			b, err := contentsRaw(t.Datatype, o.GetContents())
			if err != nil {
				return nil, fmt.Errorf("output %q: %v", t.Name, err)
			}
			t.Raw = b
		}
		if t.Raw == nil {
			t.Raw = []byte{}
		}
		if t.Parameters == nil {
			t.Parameters = oip.Parameters{}
		}
		t.Parameters[oip.BinaryDataSize] = int64(len(t.Raw))
		out.Outputs[i] = t
	}
	return out, nil
}
