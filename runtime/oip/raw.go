package oip

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/worldfoundry/wfgen/runtime/spec"
)

// CheckRawRequest checks a request built from a transport that carries
// every input's elements as raw bytes in Tensor.Raw (the protocol's gRPC
// API: raw_input_contents, in the binary tensor data extension's form —
// row-major, little-endian, a BYTES element a 4-byte length and its
// bytes): the checks DecodeBinaryRequest makes of a binary request (input
// count, names, datatypes, shapes, and raw data that fit each input's
// shape and datatype). It marks each input binary (its binary_data_size
// parameter), as the decoding of its data expects. Errors match
// ErrBadRequest and name the input; it never panics.
func CheckRawRequest(req *InferenceRequest, lim Limits) error {
	for i := range req.Inputs {
		in := &req.Inputs[i]
		if in.Data != nil {
			return bad("input %q: it has both JSON data and raw contents; give one", in.Name)
		}
		if in.Raw == nil {
			in.Raw = []byte{}
		}
		if in.Parameters == nil {
			in.Parameters = Parameters{}
		}
		in.Parameters[BinaryDataSize] = int64(len(in.Raw))
	}
	if err := checkRequest(req, lim, true); err != nil {
		return err
	}
	for i := range req.Inputs {
		in := &req.Inputs[i]
		if err := checkRaw(in); err != nil {
			return bad("input %q: %v", in.Name, err)
		}
	}
	return nil
}

// EncodeInputsRaw is EncodeInputs with every input raw, as the protocol's
// gRPC API carries them (raw_input_contents): tensor, image and video
// inputs share the kwargs' tensor data, scalar and list inputs are encoded
// in the binary extension's form (INT64, FP64 and BOOL elements
// little-endian, a BYTES element a 4-byte length and its bytes). Each has
// Raw, no Data and no parameters.
func EncodeInputsRaw(task *spec.InferenceTaskProfile, call, load map[string]any) ([]Tensor, error) {
	ts, err := encodeInputs(task, call, load, binaryTensor)
	if err != nil {
		return nil, err
	}
	for i := range ts {
		t := &ts[i]
		t.Parameters = nil
		if t.Raw != nil {
			continue
		}
		raw := []byte{}
		err := walkData(t.Data, t.Shape, func(tok []byte) error {
			switch t.Datatype {
			case Bytes:
				s, err := parseString(tok)
				if err != nil {
					return err
				}
				raw = binary.LittleEndian.AppendUint32(raw, uint32(len(s)))
				raw = append(raw, s...)
			case Bool:
				b, err := parseBool(tok)
				if err != nil {
					return err
				}
				if b {
					raw = append(raw, 1)
				} else {
					raw = append(raw, 0)
				}
			case Int64:
				n, err := parseInt(tok, Int64)
				if err != nil {
					return err
				}
				raw = binary.LittleEndian.AppendUint64(raw, uint64(n))
			case FP64:
				f, err := parseFloat(tok)
				if err != nil {
					return err
				}
				raw = binary.LittleEndian.AppendUint64(raw, math.Float64bits(f))
			default:
				return fmt.Errorf("datatype %s", t.Datatype)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("input %q: %w", t.Name, err)
		}
		t.Raw, t.Data = raw, nil
	}
	return ts, nil
}
