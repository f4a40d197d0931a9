package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/worldfoundry/wfgen/runtime/oip"
	"github.com/worldfoundry/wfgen/runtime/oip/oippb"
)

// request is one infer request of the load, in each of its encodings.
type request struct {
	model  string
	json   []byte // REST, tensors as JSON numbers
	binary []byte // REST, the binary tensor data extension: header, then the tokens
	header int    // the binary body's JSON part
	grpc   *oippb.ModelInferRequest
}

// newRequest is request id of model, with tokens.
func newRequest(model string, id int, tokens []int64) *request {
	r := &request{model: model}
	nums := make([]string, len(tokens))
	raw := make([]byte, 8*len(tokens))
	for i, t := range tokens {
		nums[i] = strconv.FormatInt(t, 10)
		binary.LittleEndian.PutUint64(raw[8*i:], uint64(t))
	}
	r.json = fmt.Appendf(nil, `{"id":"%d","inputs":[{"name":"tokens","datatype":"INT64","shape":[%d],"data":[%s]}]}`, id, len(tokens), strings.Join(nums, ","))
	header := fmt.Appendf(nil, `{"id":"%d","inputs":[{"name":"tokens","datatype":"INT64","shape":[%d],"parameters":{"binary_data_size":%d}}],"parameters":{"%s":true}}`,
		id, len(tokens), len(raw), oip.BinaryDataOutput)
	r.header = len(header)
	r.binary = append(header, raw...)
	r.grpc = &oippb.ModelInferRequest{
		ModelName:        model,
		Id:               strconv.Itoa(id),
		Inputs:           []*oippb.ModelInferRequest_InferInputTensor{{Name: "tokens", Datatype: "INT64", Shape: []int64{int64(len(tokens))}}},
		RawInputContents: [][]byte{raw},
	}
	return r
}

// postJSON sends the JSON request and checks that an embedding came back.
func (r *request) postJSON(hc *http.Client, url string) error {
	resp, err := hc.Post(url+"/v2/models/"+r.model+"/infer", "application/json", bytes.NewReader(r.json))
	if err != nil {
		return err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 || !bytes.Contains(b, []byte(`"embedding"`)) {
		return fmt.Errorf("status %d: %.200s", resp.StatusCode, b)
	}
	return nil
}

// jsonEmbedding sends the JSON request and returns the embedding.
func (r *request) jsonEmbedding(hc *http.Client, url string) ([]float64, error) {
	resp, err := hc.Post(url+"/v2/models/"+r.model+"/infer", "application/json", bytes.NewReader(r.json))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out struct {
		Outputs []struct {
			Name string    `json:"name"`
			Data []float64 `json:"data"`
		} `json:"outputs"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 || len(out.Outputs) != 1 || out.Outputs[0].Name != "embedding" {
		return nil, fmt.Errorf("status %d, %d outputs, %v", resp.StatusCode, len(out.Outputs), err)
	}
	return out.Outputs[0].Data, nil
}

// binarySender sends requests with binary tensors through hc and returns
// their embeddings.
func binarySender(hc *http.Client, url string) func(*request) ([]float64, error) {
	return func(r *request) ([]float64, error) {
		req, err := http.NewRequest(http.MethodPost, url+"/v2/models/"+r.model+"/infer", bytes.NewReader(r.binary))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", oip.BinaryContentType)
		req.Header.Set(oip.HeaderContentLength, strconv.Itoa(r.header))
		resp, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != 200 {
			return nil, fmt.Errorf("status %d: %.200s", resp.StatusCode, b)
		}
		n, err := strconv.Atoi(resp.Header.Get(oip.HeaderContentLength))
		if err != nil || n > len(b) {
			return nil, fmt.Errorf("answer without a binary part (%s %q)", oip.HeaderContentLength, resp.Header.Get(oip.HeaderContentLength))
		}
		if !bytes.Contains(b[:n], []byte(`"embedding"`)) {
			return nil, fmt.Errorf("no embedding in %.200s", b[:n])
		}
		return floats(b[n:])
	}
}

// grpcSender opens one gRPC connection to addr, which every sender shares
// (as a gRPC client does), and returns a function that sends a request's
// ModelInfer and returns the embedding; done closes the connection.
func grpcSender(addr string) (send func(*request) ([]float64, error), done func(), err error) {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, err
	}
	c := oippb.NewGRPCInferenceServiceClient(cc)
	return func(r *request) ([]float64, error) {
		resp, err := c.ModelInfer(context.Background(), r.grpc)
		if err != nil {
			return nil, err
		}
		if len(resp.Outputs) != 1 || resp.Outputs[0].Name != "embedding" || len(resp.RawOutputContents) != 1 {
			return nil, errors.New("the answer has no raw embedding")
		}
		return floats(resp.RawOutputContents[0])
	}, func() { cc.Close() }, nil
}

// floats reads little-endian float32s.
func floats(b []byte) ([]float64, error) {
	if len(b)%4 != 0 {
		return nil, fmt.Errorf("%d bytes of float32", len(b))
	}
	v := make([]float64, len(b)/4)
	for i := range v {
		v[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
	}
	return v, nil
}
