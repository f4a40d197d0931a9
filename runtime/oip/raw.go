package oip

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
