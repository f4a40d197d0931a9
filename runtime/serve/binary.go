package serve

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/worldfoundry/wfgen/runtime/oip"
)

// The binary tensor data extension (oip.BinaryExtension): a request whose
// Inference-Header-Content-Length header gives the length of its JSON part
// carries its binary inputs' data after it; outputs asked for binary
// (binary_data, binary_data_output) are answered the same way. The body is
// read, bounded and reserved like a JSON one (readBody); its tensors are
// checked against the limits like JSON ones (oip.Model.Args).

// decodeBody decodes an infer request body: JSON, or JSON and binary data
// when the request gives Inference-Header-Content-Length. It also returns
// which outputs the answer gives binary (nil: none).
func decodeBody(r *http.Request, body []byte, lim oip.Limits) (*oip.InferenceRequest, func(string) bool, error) {
	var req *oip.InferenceRequest
	var err error
	switch hs := r.Header.Values(oip.HeaderContentLength); len(hs) {
	case 0:
		req, err = oip.DecodeRequest(body, lim)
		if err != nil && strings.HasPrefix(r.Header.Get("Content-Type"), oip.BinaryContentType) {
			err = withStatus(http.StatusBadRequest, "%v (a body of type %s carries binary tensor data after its JSON part, whose length goes in the %s header, and this request has none)", err, oip.BinaryContentType, oip.HeaderContentLength)
		}
	case 1:
		n, perr := oip.ParseHeaderLength(hs[0])
		if perr != nil {
			return nil, nil, perr
		}
		req, err = oip.DecodeBinaryRequest(body, n, lim)
	default:
		err = withStatus(http.StatusBadRequest, "header %s is given %d times", oip.HeaderContentLength, len(hs))
	}
	if err != nil {
		return nil, nil, err
	}
	binary, err := oip.BinaryOutputs(req)
	if err != nil {
		return nil, nil, err
	}
	return req, binary, nil
}

// errBinaryStream refuses binary outputs to a request that asks for a
// stream.
var errBinaryStream = withStatus(http.StatusBadRequest, "binary outputs (parameters %q, %q) are not available in a stream: its chunks are JSON events", oip.BinaryDataOutput, oip.BinaryData)

// writeInfer writes a successful infer response: JSON, or its JSON part
// then its binary outputs' data (written from the output tensors, not
// copied) when it has some.
func writeInfer(w http.ResponseWriter, resp *oip.InferenceResponse) {
	header, data, err := resp.EncodeBody()
	if err != nil {
		writeError(w, fmt.Errorf("cannot encode the response: %w", err))
		return
	}
	h := w.Header()
	if data == nil {
		header = append(header, '\n')
		h.Set("Content-Type", "application/json")
		h.Set("Content-Length", strconv.Itoa(len(header)))
		w.WriteHeader(http.StatusOK)
		w.Write(header)
		return
	}
	n := len(header)
	for _, d := range data {
		n += len(d)
	}
	h.Set("Content-Type", oip.BinaryContentType)
	h.Set(oip.HeaderContentLength, strconv.Itoa(len(header)))
	h.Set("Content-Length", strconv.Itoa(n))
	w.WriteHeader(http.StatusOK)
	bufs := append(net.Buffers{header}, data...)
	bufs.WriteTo(w)
}
