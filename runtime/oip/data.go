package oip

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/worldfoundry/wfgen/runtime/artifactio"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// scanner walks tensor data: a JSON array of scalars, flat in row-major
// order or nested to match a shape. The request decoder has already checked
// that the data is valid JSON, so the scanner only follows its structure.
type scanner struct {
	b     []byte
	i     int
	shape []int64
	n     int64 // elements the shape holds
	seen  int64 // scalars passed to leaf so far
	leaf  func(tok []byte) error
}

// walkData calls leaf with the raw JSON text of each scalar of data, in
// row-major order, and checks that data holds exactly the elements of
// shape: as one flat array, or as arrays nested to shape's rank whose
// lengths are shape's dimensions.
func walkData(data []byte, shape []int64, leaf func(tok []byte) error) error {
	n, err := elements(shape)
	if err != nil {
		return err
	}
	s := &scanner{b: data, shape: shape, n: n, leaf: leaf}
	s.ws()
	if err := s.array(0); err != nil {
		return err
	}
	if s.seen != n {
		return fmt.Errorf("data has %d elements, shape %v holds %d", s.seen, shape, n)
	}
	return nil
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// array reads one array at nesting depth.
func (s *scanner) array(depth int) error {
	if s.peek() != '[' {
		return errors.New("data must be a JSON array")
	}
	s.i++
	s.ws()
	var count int64
	nested, flat := false, false
	if s.peek() == ']' {
		s.i++
	} else {
		for {
			s.ws()
			if s.peek() == '[' {
				nested = true
				if depth+1 >= len(s.shape) {
					return fmt.Errorf("data is nested deeper than shape %v", s.shape)
				}
				if err := s.array(depth + 1); err != nil {
					return err
				}
			} else {
				flat = true
				tok, err := s.scalar()
				if err != nil {
					return err
				}
				if s.seen >= s.n {
					return fmt.Errorf("data has more elements than shape %v holds (%d)", s.shape, s.n)
				}
				s.seen++
				if err := s.leaf(tok); err != nil {
					return fmt.Errorf("element %d: %w", s.seen-1, err)
				}
			}
			count++
			s.ws()
			switch s.peek() {
			case ',':
				s.i++
				continue
			case ']':
				s.i++
			default:
				return errors.New("malformed data array")
			}
			break
		}
	}
	switch {
	case nested && flat:
		return errors.New("data mixes arrays and scalars at one level")
	case nested:
		if count != s.shape[depth] {
			return fmt.Errorf("data has %d arrays at level %d, shape %v has %d", count, depth, s.shape, s.shape[depth])
		}
	case depth > 0:
		// Scalars (or nothing) inside a nested array: the innermost level.
		if depth != len(s.shape)-1 || count != s.shape[depth] {
			return fmt.Errorf("data has %d elements at level %d, shape %v wants %s", count, depth, s.shape, levelWant(s.shape, depth))
		}
	}
	return nil
}

func levelWant(shape []int64, depth int) string {
	if depth != len(shape)-1 {
		return fmt.Sprintf("arrays nested %d levels deep", len(shape))
	}
	return strconv.FormatInt(shape[depth], 10)
}

// scalar returns the raw text of one scalar: a string with its quotes, a
// number, true, false or null.
func (s *scanner) scalar() ([]byte, error) {
	start := s.i
	if s.peek() == '"' {
		s.i++
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case '\\':
				s.i += 2
				continue
			case '"':
				s.i++
				return s.b[start:s.i], nil
			}
			s.i++
		}
		return nil, errors.New("malformed data array")
	}
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ',', ']', ' ', '\t', '\n', '\r':
			if s.i == start {
				return nil, errors.New("malformed data array")
			}
			return s.b[start:s.i], nil
		case '{', '[', '}':
			return nil, errors.New("data elements must be scalars")
		}
		s.i++
	}
	return nil, errors.New("malformed data array")
}

// intRange returns the bounds of an integer datatype.
func intRange(d Datatype) (lo int64, hi uint64) {
	switch d {
	case Int8:
		return math.MinInt8, math.MaxInt8
	case Int16:
		return math.MinInt16, math.MaxInt16
	case Int32:
		return math.MinInt32, math.MaxInt32
	case Int64:
		return math.MinInt64, math.MaxInt64
	case Uint8:
		return 0, math.MaxUint8
	case Uint16:
		return 0, math.MaxUint16
	case Uint32:
		return 0, math.MaxUint32
	}
	return 0, math.MaxUint64
}

// parseInt parses one integer element of datatype d into an int64; a
// UINT64 above the int64 range is an error.
func parseInt(tok []byte, d Datatype) (int64, error) {
	lo, hi := intRange(d)
	s := string(tok)
	if len(s) > 0 && s[0] == '-' {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < lo {
			return 0, fmt.Errorf("%s is not a valid %s element", show(tok), d)
		}
		return v, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || v > hi {
		return 0, fmt.Errorf("%s is not a valid %s element", show(tok), d)
	}
	if v > math.MaxInt64 {
		return 0, fmt.Errorf("%s is above the int64 range", show(tok))
	}
	return int64(v), nil
}

// parseFloat parses one floating element; "NaN", "Infinity" and
// "-Infinity" (strings) stand for the values JSON cannot carry.
func parseFloat(tok []byte) (float64, error) {
	switch string(tok) {
	case `"NaN"`:
		return math.NaN(), nil
	case `"Infinity"`:
		return math.Inf(1), nil
	case `"-Infinity"`:
		return math.Inf(-1), nil
	}
	if len(tok) == 0 || tok[0] == '"' || tok[0] == 't' || tok[0] == 'f' || tok[0] == 'n' {
		return 0, fmt.Errorf("%s is not a number", show(tok))
	}
	v, err := strconv.ParseFloat(string(tok), 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && errors.Is(ne.Err, strconv.ErrRange) {
			return 0, fmt.Errorf("%s is out of range", show(tok))
		}
		return 0, fmt.Errorf("%s is not a number", show(tok))
	}
	return v, nil
}

func parseBool(tok []byte) (bool, error) {
	switch string(tok) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("%s is not a boolean", show(tok))
}

func parseString(tok []byte) (string, error) {
	if len(tok) == 0 || tok[0] != '"' {
		return "", fmt.Errorf("%s is not a string", show(tok))
	}
	var s string
	if err := json.Unmarshal(tok, &s); err != nil {
		return "", fmt.Errorf("%s is not a string", show(tok))
	}
	return s, nil
}

// show quotes a token for messages, cut to a readable length.
func show(tok []byte) string {
	if len(tok) > 40 {
		return string(tok[:37]) + "..."
	}
	return string(tok)
}

// decodeTensor decodes a tensor's data into a runtime tensor of its
// datatype, which must have a runtime dtype. maxBytes > 0 bounds its size.
func decodeTensor(t *Tensor, maxBytes int64) (*tensor.Tensor, error) {
	dtype, ok := t.Datatype.DType()
	if !ok {
		return nil, fmt.Errorf("datatype %s has no runtime dtype (tensors take %s)", t.Datatype, datatypeList(TensorDatatypes))
	}
	n, err := elements(t.Shape)
	if err != nil {
		return nil, err
	}
	size := n * int64(dtype.Size())
	if maxBytes > 0 && size > maxBytes {
		return nil, fmt.Errorf("%s%v is %d bytes, above the limit of %d bytes per tensor", t.Datatype, t.Shape, size, maxBytes)
	}
	if t.IsBinary() {
		return rawTensor(t, dtype, size)
	}
	if n > int64(len(t.Data)) { // every element takes at least one byte of JSON
		return nil, fmt.Errorf("data has fewer elements than shape %v holds (%d)", t.Shape, n)
	}
	buf := make([]byte, 0, size)
	var leaf func(tok []byte) error
	switch t.Datatype {
	case Bool:
		leaf = func(tok []byte) error {
			b, err := parseBool(tok)
			if b {
				buf = append(buf, 1)
			} else {
				buf = append(buf, 0)
			}
			return err
		}
	case Uint8:
		leaf = func(tok []byte) error {
			v, err := parseInt(tok, t.Datatype)
			buf = append(buf, byte(v))
			return err
		}
	case Int32:
		leaf = func(tok []byte) error {
			v, err := parseInt(tok, t.Datatype)
			buf = binary.LittleEndian.AppendUint32(buf, uint32(int32(v)))
			return err
		}
	case Int64:
		leaf = func(tok []byte) error {
			v, err := parseInt(tok, t.Datatype)
			buf = binary.LittleEndian.AppendUint64(buf, uint64(v))
			return err
		}
	case FP32:
		leaf = func(tok []byte) error {
			v, err := parseFloat(tok)
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(float32(v)))
			return err
		}
	case FP16:
		leaf = func(tok []byte) error {
			v, err := parseFloat(tok)
			buf = binary.LittleEndian.AppendUint16(buf, artifactio.Float32ToFloat16(float32(v)))
			return err
		}
	case BF16:
		leaf = func(tok []byte) error {
			v, err := parseFloat(tok)
			buf = binary.LittleEndian.AppendUint16(buf, artifactio.Float32ToBFloat16(float32(v)))
			return err
		}
	}
	if err := walkData(t.Data, t.Shape, leaf); err != nil {
		return nil, err
	}
	return &tensor.Tensor{DType: dtype, Shape: append([]int64{}, t.Shape...), Data: buf}, nil
}

// encodeTensor returns the named OIP tensor holding t.
func encodeTensor(name string, t *tensor.Tensor) (Tensor, error) {
	if err := t.Check(); err != nil {
		return Tensor{}, err
	}
	dt, ok := DatatypeOf(t.DType)
	if !ok {
		return Tensor{}, fmt.Errorf("dtype %s has no OIP datatype", t.DType)
	}
	n := int(t.NumElements())
	out := make([]byte, 0, 2+n*4)
	out = append(out, '[')
	for i := 0; i < n; i++ {
		if i > 0 {
			out = append(out, ',')
		}
		switch t.DType {
		case tensor.Bool:
			out = strconv.AppendBool(out, t.Data[i] != 0)
		case tensor.Uint8:
			out = strconv.AppendUint(out, uint64(t.Data[i]), 10)
		case tensor.Int32:
			out = strconv.AppendInt(out, int64(int32(binary.LittleEndian.Uint32(t.Data[4*i:]))), 10)
		case tensor.Int64:
			out = strconv.AppendInt(out, int64(binary.LittleEndian.Uint64(t.Data[8*i:])), 10)
		case tensor.Float32:
			out = appendFloat(out, float64(math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:]))), 32)
		case tensor.Float16:
			out = appendFloat(out, float64(artifactio.Float16ToFloat32(binary.LittleEndian.Uint16(t.Data[2*i:]))), 32)
		case tensor.BFloat16:
			out = appendFloat(out, float64(artifactio.BFloat16ToFloat32(binary.LittleEndian.Uint16(t.Data[2*i:]))), 32)
		}
	}
	out = append(out, ']')
	shape := t.Shape
	if shape == nil {
		shape = []int64{}
	}
	return Tensor{Name: name, Datatype: dt, Shape: append([]int64{}, shape...), Data: out}, nil
}

// appendFloat appends a JSON number, or the string standing for NaN or an
// infinity.
func appendFloat(b []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(b, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(b, `"-Infinity"`...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, bits)
}

// encodeScalars returns the data of a 1-D tensor of scalars (string,
// int64, float64 or bool values) with datatype d.
func encodeScalars(vals []any, d Datatype) ([]byte, error) {
	out := []byte{'['}
	for i, v := range vals {
		if i > 0 {
			out = append(out, ',')
		}
		switch d {
		case Bytes:
			s, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("item %d is %s, want a string", i, describe(v))
			}
			b, _ := json.Marshal(s) // a Go string always marshals
			out = append(out, b...)
		case Int64:
			n, ok := v.(int64)
			if !ok {
				return nil, fmt.Errorf("item %d is %s, want an int64", i, describe(v))
			}
			out = strconv.AppendInt(out, n, 10)
		case FP64:
			f, ok := v.(float64)
			if !ok {
				return nil, fmt.Errorf("item %d is %s, want a float64", i, describe(v))
			}
			out = appendFloat(out, f, 64)
		case Bool:
			b, ok := v.(bool)
			if !ok {
				return nil, fmt.Errorf("item %d is %s, want a bool", i, describe(v))
			}
			out = strconv.AppendBool(out, b)
		default:
			return nil, fmt.Errorf("no scalar encoding for %s", d)
		}
	}
	return append(out, ']'), nil
}

// describe names a value's type for messages.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "nothing"
	case *tensor.Tensor:
		if x == nil {
			return "a nil tensor"
		}
		return fmt.Sprintf("a tensor %s%v", x.DType, x.Shape)
	case string:
		return "a string"
	case int64:
		return "an int64"
	case float64:
		return "a float64"
	case bool:
		return "a bool"
	case []any:
		return fmt.Sprintf("a list of %d", len(x))
	case map[string]any:
		return "a dict"
	}
	return fmt.Sprintf("%T", v)
}
