// Package oip maps model families onto the Open Inference Protocol (OIP,
// also called KServe v2) REST API: the protocol's JSON types, its tensor
// data types, the mapping between a task's typed fields and artifacts and
// the protocol's named input and output tensors, model metadata derived from
// a spec, request decoding with clear protocol errors, and the OpenAPI 3.1
// document of a set of families.
//
// The mapping (docs/serving.md has the full table):
//
//   - A model is a family: its name is the family id (aliases are accepted
//     in paths); its versions are the variant ids (aliases accepted). A
//     request without a version runs the default variant, or the variant
//     named by the request parameter "variant".
//   - The request parameter "task" picks the task (id or alias); without it
//     the family's default task runs.
//   - Each input field is one named input tensor, named by its field id:
//     string → BYTES [1], int → INT64 [1] (any integer type is accepted),
//     float → FP64 [1] (FP32, FP16 and BF16 are accepted), bool → BOOL [1];
//     list kinds are 1-D tensors of their element's type, shape [n];
//     tensor, image and video fields are tensors of their own datatype and
//     shape; a tensor_list field is one input per item, named FIELD.0,
//     FIELD.1, ... Absent fields take their manifest default.
//   - Each artifact is one named output tensor, named by its artifact id:
//     tensor-like artifacts are tensors; text is BYTES [1]; json is BYTES
//     [1] holding the JSON text; a tensor_list artifact is one output per
//     element, named ARTIFACT.0, ARTIFACT.1, ..., with the element count
//     in the response parameter ARTIFACT.count (lists.go; EncodeResponse,
//     DecodeResponse); a record artifact is one output per key it holds,
//     ARTIFACT.KEY, a record_list one per key of each element,
//     ARTIFACT.I.KEY, with the number of keys (record) or elements
//     (record_list) in ARTIFACT.count (records.go).
//
// Tensor data is JSON: flattened in row-major order or nested to match the
// shape. JSON has no NaN or infinities; floating outputs carry them as the
// strings "NaN", "Infinity" and "-Infinity", and the decoder accepts them.
//
// The package is pure Go (no cgo): the generator imports it for OpenAPI.
package oip

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"

	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// Datatype is an OIP tensor data type ("FP32", "BYTES", ...).
type Datatype string

// The OIP tensor data types.
const (
	Bool   Datatype = "BOOL"
	Uint8  Datatype = "UINT8"
	Uint16 Datatype = "UINT16"
	Uint32 Datatype = "UINT32"
	Uint64 Datatype = "UINT64"
	Int8   Datatype = "INT8"
	Int16  Datatype = "INT16"
	Int32  Datatype = "INT32"
	Int64  Datatype = "INT64"
	FP16   Datatype = "FP16"
	FP32   Datatype = "FP32"
	FP64   Datatype = "FP64"
	BF16   Datatype = "BF16"
	Bytes  Datatype = "BYTES"
)

// AnyDatatype is the datatype model metadata gives a tensor whose dtype the
// manifest leaves open: any datatype with a runtime dtype (TensorDatatypes)
// is accepted there.
const AnyDatatype Datatype = "ANY"

// Datatypes lists every OIP data type, in the protocol's order.
var Datatypes = []Datatype{Bool, Uint8, Uint16, Uint32, Uint64, Int8, Int16, Int32, Int64, FP16, FP32, FP64, BF16, Bytes}

// TensorDatatypes are the data types a tensor, image or video field
// accepts: those with a runtime dtype (spec.BaseTensor's).
var TensorDatatypes = baseDatatypes[spec.BaseTensor]

// Valid reports whether d is one of the OIP data types.
func (d Datatype) Valid() bool {
	for _, x := range Datatypes {
		if d == x {
			return true
		}
	}
	return false
}

// Size returns the size in bytes of one element, or 0 for BYTES and
// unknown types.
func (d Datatype) Size() int {
	switch d {
	case Bool, Uint8, Int8:
		return 1
	case Uint16, Int16, FP16, BF16:
		return 2
	case Uint32, Int32, FP32:
		return 4
	case Uint64, Int64, FP64:
		return 8
	}
	return 0
}

// Integer reports whether d is an integer type.
func (d Datatype) Integer() bool {
	switch d {
	case Uint8, Uint16, Uint32, Uint64, Int8, Int16, Int32, Int64:
		return true
	}
	return false
}

// Floating reports whether d is a floating-point type.
func (d Datatype) Floating() bool { return d == FP16 || d == FP32 || d == FP64 || d == BF16 }

// DType returns the runtime dtype of d, if it has one.
func (d Datatype) DType() (tensor.DType, bool) {
	switch d {
	case Bool:
		return tensor.Bool, true
	case Uint8:
		return tensor.Uint8, true
	case Int32:
		return tensor.Int32, true
	case Int64:
		return tensor.Int64, true
	case FP16:
		return tensor.Float16, true
	case FP32:
		return tensor.Float32, true
	case BF16:
		return tensor.BFloat16, true
	}
	return "", false
}

// DatatypeOf returns the OIP data type of a runtime dtype.
func DatatypeOf(d tensor.DType) (Datatype, bool) {
	switch d {
	case tensor.Bool:
		return Bool, true
	case tensor.Uint8:
		return Uint8, true
	case tensor.Int32:
		return Int32, true
	case tensor.Int64:
		return Int64, true
	case tensor.Float16:
		return FP16, true
	case tensor.Float32:
		return FP32, true
	case tensor.BFloat16:
		return BF16, true
	}
	return "", false
}

// Parameters are the protocol's free-form parameters of a request, a
// response or a tensor. Decoded numbers are json.Number.
type Parameters map[string]any

// UnmarshalJSON decodes parameters with their numbers as json.Number, so
// that an integer stays exact and is told from a float.
func (p *Parameters) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return err
	}
	*p = m
	return nil
}

// Tensor is a named tensor of a request ("request input") or a response
// ("response output"): datatype, shape and the data as raw JSON.
type Tensor struct {
	// Name is the input's field id or the output's artifact id.
	Name string `json:"name"`
	// Shape is the size of each dimension.
	Shape []int64 `json:"shape"`
	// Datatype is the element type.
	Datatype Datatype `json:"datatype"`
	// Parameters are the tensor's parameters, if any.
	Parameters Parameters `json:"parameters,omitempty"`
	// Data holds the elements: a JSON array, flat in row-major order or
	// nested to match Shape. It is absent when the tensor travels binary.
	Data json.RawMessage `json:"data,omitempty"`
	// Raw holds the elements of a tensor that travels binary (the binary
	// tensor data extension: its parameters give binary_data_size; see
	// binary.go), in the extension's form.
	Raw []byte `json:"-"`
}

// RequestOutput asks for one output by name.
type RequestOutput struct {
	// Name is the artifact id.
	Name string `json:"name"`
	// Parameters are the output's parameters, if any.
	Parameters Parameters `json:"parameters,omitempty"`
}

// InferenceRequest is the body of POST .../infer.
type InferenceRequest struct {
	// ID is echoed in the response; it also serves as the correlation id of
	// the server's logs when no X-Request-ID header is given.
	ID string `json:"id,omitempty"`
	// Parameters select the task ("task") and variant ("variant"), and
	// configure streams (see docs/serving.md).
	Parameters Parameters `json:"parameters,omitempty"`
	// Inputs are the task's fields, one tensor each.
	Inputs []Tensor `json:"inputs"`
	// Outputs, when given, restrict the response to these artifacts.
	Outputs []RequestOutput `json:"outputs,omitempty"`
}

// InferenceResponse is the body of a successful infer response, and of each
// chunk event of a stream.
type InferenceResponse struct {
	// ModelName is the family id.
	ModelName string `json:"model_name"`
	// ModelVersion is the variant that ran and, from wfserve, the revision
	// of its checkpoint that computed the answer: VARIANT@N
	// (docs/operating.md, Versions). Requests name the variant alone.
	ModelVersion string `json:"model_version,omitempty"`
	// ID is the request's id.
	ID string `json:"id,omitempty"`
	// Parameters carry the task that ran ("task") and, for chunks, the
	// chunk's place in the stream.
	Parameters Parameters `json:"parameters,omitempty"`
	// Outputs are the artifacts, one tensor each.
	Outputs []Tensor `json:"outputs"`
}

// ErrorResponse is the body of every error response.
type ErrorResponse struct {
	// Error says what went wrong.
	Error string `json:"error"`
}

// ServerMetadata is the body of GET /v2.
type ServerMetadata struct {
	// Name is the server's name.
	Name string `json:"name"`
	// Version is the server's version.
	Version string `json:"version"`
	// Extensions are the protocol extensions the server supports.
	Extensions []string `json:"extensions"`
}

// TensorMetadata describes one input or output in model metadata.
type TensorMetadata struct {
	// Name is the field or artifact id.
	Name string `json:"name"`
	// Datatype is the element type (AnyDatatype when the manifest leaves
	// it open).
	Datatype Datatype `json:"datatype"`
	// Shape gives each dimension; -1 is a dimension of any size. nil means
	// any rank.
	Shape []int64 `json:"shape"`
	// Parameters tell the field's kind, presence and default, or the
	// artifact's kind.
	Parameters Parameters `json:"parameters,omitempty"`
}

// ModelMetadata is the body of GET /v2/models/{name}[/versions/{version}].
type ModelMetadata struct {
	// Name is the family id.
	Name string `json:"name"`
	// Versions are the variant ids.
	Versions []string `json:"versions,omitempty"`
	// Platform is the serving platform.
	Platform string `json:"platform"`
	// Inputs are the default task's inputs.
	Inputs []TensorMetadata `json:"inputs"`
	// Outputs are the default task's outputs.
	Outputs []TensorMetadata `json:"outputs"`
	// Parameters hold the default task and variant and every task's
	// inputs and outputs ("tasks").
	Parameters Parameters `json:"parameters,omitempty"`
}

// Platform is the platform model metadata reports: TorchScript run by
// libtorch.
const Platform = "pytorch_libtorch"

// Limits bound what a request may carry. Zero values mean no limit.
type Limits struct {
	// MaxTensorBytes bounds the size of one input tensor's elements.
	MaxTensorBytes int64
	// MaxInputs bounds the number of input tensors of a request, and of
	// the outputs it asks for.
	MaxInputs int
	// Reserve, when set, is called before a request is decoded with the
	// bytes decoding it will take beyond the request's own bytes and its
	// tensor data (the Go values its other JSON values, or protobuf
	// fields, become); an error it returns is the decoder's. A server
	// counts them against its in-flight budget.
	Reserve func(n int64) error
}

// ErrBadRequest is matched (errors.Is) by every error that a malformed
// request or an input that breaks the task's contract causes: the server
// answers it with status 400.
var ErrBadRequest = errors.New("bad request")

// badRequest is an error caused by the request.
type badRequest struct {
	msg string
	err error // the underlying error, if any
}

func (e *badRequest) Error() string        { return e.msg }
func (e *badRequest) Is(target error) bool { return target == ErrBadRequest }
func (e *badRequest) Unwrap() error        { return e.err }

func bad(format string, args ...any) error { return &badRequest{msg: fmt.Sprintf(format, args...)} }

// DecodeRequest decodes an infer request body. Malformed JSON, a body that
// is not one JSON object, an input without a name, with an unknown datatype,
// a negative dimension or data that is not an array are errors matching
// ErrBadRequest; it never panics. The body is decoded in place (no buffer
// of the decoder's own): a server reads it whole first, with its size
// bounded and counted.
func DecodeRequest(body []byte, lim Limits) (*InferenceRequest, error) {
	return decodeRequest(body, lim, false)
}

// decodeRequest decodes a request's JSON; binary: its inputs may carry
// their data in the binary part of the body (DecodeBinaryRequest).
func decodeRequest(body []byte, lim Limits, binary bool) (*InferenceRequest, error) {
	var req InferenceRequest
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, bad("empty body (want a JSON object)")
	}
	// Counted before decoding: what the request's values become.
	m := measureJSON(body)
	if err := lim.CheckCounts(m.inputs, m.outputs); err != nil {
		return nil, err
	}
	if lim.Reserve != nil {
		if err := lim.Reserve(m.cost); err != nil {
			return nil, err
		}
	}
	if err := json.Unmarshal(body, &req); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) && strings.Contains(se.Error(), "after top-level value") {
			return nil, bad("malformed request body: data after the JSON object")
		}
		return nil, &badRequest{msg: "malformed request body: " + jsonMessage(err), err: err}
	}
	if err := checkRequest(&req, lim, binary); err != nil {
		return nil, err
	}
	return &req, nil
}

// CheckCounts refuses a request with more inputs, or asking for more
// outputs, than MaxInputs: an error matching ErrBadRequest.
func (lim Limits) CheckCounts(inputs, outputs int) error {
	if lim.MaxInputs <= 0 {
		return nil
	}
	if inputs > lim.MaxInputs {
		return bad("the request has %d inputs, at most %d are allowed", inputs, lim.MaxInputs)
	}
	if outputs > lim.MaxInputs {
		return bad("the request asks for %d outputs, at most %d are allowed", outputs, lim.MaxInputs)
	}
	return nil
}

// checkRequest checks a decoded request's inputs and outputs (see
// DecodeRequest); binary: its inputs may be binary (binary_data_size).
func checkRequest(req *InferenceRequest, lim Limits, binary bool) error {
	if err := lim.CheckCounts(len(req.Inputs), len(req.Outputs)); err != nil {
		return err
	}
	seen := make(map[string]bool, len(req.Inputs))
	for i := range req.Inputs {
		in := &req.Inputs[i]
		if in.Name == "" {
			return bad("inputs[%d]: no name", i)
		}
		if seen[in.Name] {
			return bad("input %q: given twice", in.Name)
		}
		seen[in.Name] = true
		if !in.Datatype.Valid() {
			return bad("input %q: datatype %q is not an OIP datatype (%s)", in.Name, in.Datatype, datatypeList(Datatypes))
		}
		if in.Shape == nil {
			return bad("input %q: no shape", in.Name)
		}
		if _, err := elements(in.Shape); err != nil {
			return bad("input %q: %v", in.Name, err)
		}
		if err := checkData(in, binary); err != nil {
			return err
		}
	}
	for i, o := range req.Outputs {
		if o.Name == "" {
			return bad("outputs[%d]: no name", i)
		}
	}
	return nil
}

// jsonMessage shortens encoding/json's errors to what a client needs.
func jsonMessage(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		where := fieldPath(te.Field)
		if where == "" {
			where = "the request"
		}
		if strings.HasPrefix(te.Value, "number") && isInt(te.Type.Kind()) {
			// A number where an integer goes: 1e30, 2.5, or one beyond
			// the type's range.
			return fmt.Sprintf("%s: %s is not a whole number that fits %s (write it with digits only)", where, te.Value, te.Type.Kind())
		}
		return fmt.Sprintf("%s: JSON %s where %s was expected", where, te.Value, jsonKind(te.Type.Kind().String()))
	}
	if errors.Is(err, io.EOF) {
		return "empty body (want a JSON object)"
	}
	return err.Error()
}

// fieldPath drops the array indices that newer encoding/json versions
// put in UnmarshalTypeError.Field ("inputs.0.shape.0"), so a client
// reads the same path ("inputs.shape") whichever Go built the server.
func fieldPath(field string) string {
	parts := strings.Split(field, ".")
	kept := parts[:0]
	for _, p := range parts {
		if p != "" && strings.Trim(p, "0123456789") == "" {
			continue
		}
		kept = append(kept, p)
	}
	return strings.Join(kept, ".")
}

// isInt reports whether k is an integer kind.
func isInt(k reflect.Kind) bool {
	switch k {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

func jsonKind(k string) string {
	switch k {
	case "struct", "map":
		return "an object"
	case "slice", "array":
		return "an array"
	case "string":
		return "a string"
	case "int64", "int", "float64":
		return "a number"
	}
	return k
}

// maxRank bounds the rank of a tensor.
const maxRank = 16

// elements returns the number of elements of shape, or an error for a
// negative dimension, too many dimensions or an element count that
// overflows.
func elements(shape []int64) (int64, error) {
	if len(shape) > maxRank {
		return 0, fmt.Errorf("shape %v has %d dimensions, at most %d are supported", shape, len(shape), maxRank)
	}
	n := int64(1)
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("shape %v has a negative dimension", shape)
		}
		if d != 0 && n > (1<<53)/d {
			return 0, fmt.Errorf("shape %v has too many elements", shape)
		}
		n *= d
	}
	return n, nil
}

func datatypeList(ds []Datatype) string {
	var b []byte
	for i, d := range ds {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, d...)
	}
	return string(b)
}

// StringParam returns parameter key as a string; absent is "", false. A
// value that is not a string is an error matching ErrBadRequest.
func (p Parameters) StringParam(key string) (string, bool, error) {
	v, ok := p[key]
	if !ok || v == nil {
		return "", false, nil
	}
	s, ok := v.(string)
	if !ok {
		return "", false, bad("parameter %q must be a string, got %s", key, jsonPhrase(v))
	}
	return s, true, nil
}

// BoolParam returns parameter key as a bool; absent is false, false.
func (p Parameters) BoolParam(key string) (bool, bool, error) {
	v, ok := p[key]
	if !ok || v == nil {
		return false, false, nil
	}
	b, ok := v.(bool)
	if !ok {
		return false, false, bad("parameter %q must be a boolean, got %s", key, jsonPhrase(v))
	}
	return b, true, nil
}

// IntParam returns parameter key as an int64; absent is 0, false.
func (p Parameters) IntParam(key string) (int64, bool, error) {
	v, ok := p[key]
	if !ok || v == nil {
		return 0, false, nil
	}
	var n int64
	var err error
	switch x := v.(type) {
	case json.Number:
		n, err = strconv.ParseInt(string(x), 10, 64)
	case int64:
		n = x
	case int:
		n = int64(x)
	default:
		err = errors.New("not a number")
	}
	if err != nil {
		return 0, false, bad("parameter %q must be an integer, got %s", key, jsonPhrase(v))
	}
	return n, true, nil
}

// FloatsParam returns parameter key as an object of numbers (controls),
// given as a string holding its JSON text (the protocol's parameters are
// scalars) or as an object; absent is nil, false.
func (p Parameters) FloatsParam(key string) (map[string]float64, bool, error) {
	v, ok := p[key]
	if !ok || v == nil {
		return nil, false, nil
	}
	if text, isText := v.(string); isText {
		// The protocol's parameters are scalars: structured values travel
		// as JSON text.
		var obj map[string]any
		dec := json.NewDecoder(strings.NewReader(text))
		dec.UseNumber()
		if err := dec.Decode(&obj); err != nil || dec.More() {
			return nil, false, bad("parameter %q must be a JSON object of numbers written as a string, got %s", key, jsonPhrase(v))
		}
		v = obj
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, false, bad("parameter %q must be an object of numbers (or that object as JSON text), got %s", key, jsonPhrase(v))
	}
	out := make(map[string]float64, len(m))
	for k, x := range m {
		f, err := number(x)
		if err != nil {
			return nil, false, bad("parameter %q: %q must be a number, got %s", key, k, jsonPhrase(x))
		}
		out[k] = f
	}
	return out, true, nil
}

func number(v any) (float64, error) {
	switch x := v.(type) {
	case json.Number:
		return x.Float64()
	case float64:
		return x, nil
	case int64:
		return float64(x), nil
	case int:
		return float64(x), nil
	}
	return 0, errors.New("not a number")
}

// jsonPhrase describes a decoded JSON value for messages.
func jsonPhrase(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return fmt.Sprintf("the string %q", x)
	case bool:
		return fmt.Sprintf("the boolean %v", x)
	case json.Number:
		return "the number " + string(x)
	case float64, int64, int:
		return fmt.Sprintf("the number %v", x)
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}
