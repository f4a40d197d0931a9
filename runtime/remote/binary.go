package remote

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/worldfoundry/wfgen/runtime/oip"
)

// binaryBody returns the body of an infer request and, when its inputs
// travel binary, the length of its JSON part (else 0).
func binaryBody(req *oip.InferenceRequest) ([]byte, int, error) {
	header, data, err := req.EncodeBody()
	if err != nil {
		return nil, 0, err
	}
	if data == nil {
		return header, 0, nil
	}
	n := len(header)
	for _, d := range data {
		n += len(d)
	}
	body := make([]byte, 0, n)
	body = append(body, header...)
	for _, d := range data {
		body = append(body, d...)
	}
	return body, len(header), nil
}

// decodeBinary decodes an answer of the binary tensor data extension
// (headerLen: its Inference-Header-Content-Length) into out, which must be
// an *oip.InferenceResponse.
func decodeBinary(resp *http.Response, headerLen string, out any) error {
	dst, ok := out.(*oip.InferenceResponse)
	if !ok {
		return fmt.Errorf("binary tensor data (%s) in an answer that is not an inference response", oip.HeaderContentLength)
	}
	n, err := oip.ParseHeaderLength(headerLen)
	if err != nil {
		return errors.New(err.Error())
	}
	var body []byte
	if resp.ContentLength >= 0 {
		body = make([]byte, resp.ContentLength)
		_, err = io.ReadFull(resp.Body, body)
	} else {
		body, err = io.ReadAll(resp.Body)
	}
	if err != nil {
		return err
	}
	r, err := oip.DecodeBinaryResponse(body, n)
	if err != nil {
		return err
	}
	*dst = *r
	return nil
}
