package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/oip"
	"github.com/worldfoundry/wfgen/runtime/oip/oippb"
)

var grpcRecord = regexp.MustCompile(`grpc_addr=(\S+)`)

// grpcurlVersion is the grpcurl the test builds from the module proxy.
const grpcurlVersion = "v1.9.3"

// grpcurl builds grpcurl, a gRPC command-line client nobody here wrote,
// from the module proxy into the test's temporary folder and returns its
// path; the test is skipped when the proxy refuses it (or there is no
// network and it is not in the module cache).
func grpcurl(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", "install", "github.com/fullstorydev/grpcurl/cmd/grpcurl@"+grpcurlVersion)
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("grpcurl %s could not be built from the module proxy, so the third-party client is not tried: %v\n%s", grpcurlVersion, err, out)
	}
	return filepath.Join(dir, "grpcurl")
}

// docsModelInfer is the request docs/serving.md's grpcurl example sends:
// the tiny encoder's tokens [1, 2, 3, 4] as raw little-endian int64.
const docsModelInfer = `{"model_name": "tiny-encoder", "inputs": [{"name": "tokens", "datatype": "INT64", "shape": [4]}], "raw_input_contents": ["AQAAAAAAAAACAAAAAAAAAAMAAAAAAAAABAAAAAAAAAA="]}`

// TestGrpcServeAndDrain runs wfserve with -grpc-addr and a token: grpcurl
// (through the reflection service, without the .proto) lists the services
// and calls ModelInfer with docs/serving.md's request, whose raw output is
// the REST answer's, bit for bit; a call without the token is refused;
// SIGTERM ends an open realtime session with Unavailable and wfserve exits
// 0 after draining.
func TestGrpcServeAndDrain(t *testing.T) {
	dir := tiny.Dir(t)
	manifests := filepath.Join("..", "..", "manifests")
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte("sesame\n"), 0o600)
	var stderr enginetest.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run([]string{"-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0", "-token-file", tokenFile, "-checkpoint-root", dir, "-device", "cpu",
			filepath.Join(manifests, "tiny-encoder.yaml"), filepath.Join(manifests, "tiny-world.yaml")}, &bytes.Buffer{}, &stderr)
	}()
	url := servingURL(t, &stderr, runExit(done))
	m := grpcRecord.FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("no grpc_addr record:\n%s", stderr.String())
	}
	addr := m[1]

	// docs/serving.md's grpcurl example sends the request this test sends.
	docs, err := os.ReadFile(filepath.Join("..", "..", "docs", "serving.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(docs), "-d '"+docsModelInfer+"' localhost:8081 inference.GRPCInferenceService/ModelInfer") {
		t.Errorf("docs/serving.md's grpcurl example does not send the request this test sends:\n%s", docsModelInfer)
	}

	// The REST answer, binary.
	req, _ := http.NewRequest("POST", url+"/v2/models/tiny-encoder/infer",
		strings.NewReader(`{"inputs":[{"name":"tokens","datatype":"INT64","shape":[4],"data":[1,2,3,4]}],"parameters":{"binary_data_output":true}}`))
	req.Header.Set("Authorization", "Bearer sesame")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	restBody, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("REST infer: %d %s", resp.StatusCode, restBody)
	}

	// grpcurl: the services through reflection, then ModelInfer.
	bin := grpcurl(t)
	out, err := exec.Command(bin, "-plaintext", "-H", "authorization: Bearer sesame", addr, "list").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "inference.GRPCInferenceService") || !strings.Contains(string(out), "wfgen.realtime.RealtimeInferenceService") {
		t.Fatalf("grpcurl list: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "-plaintext", "-H", "authorization: Bearer sesame", "-d", "@", addr, "inference.GRPCInferenceService/ModelInfer")
	cmd.Stdin = strings.NewReader(docsModelInfer)
	out, err = cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("grpcurl ModelInfer: %v\n%s", err, out)
	}
	var answer struct {
		ModelName         string   `json:"modelName"`
		ModelVersion      string   `json:"modelVersion"`
		Outputs           []any    `json:"outputs"`
		RawOutputContents [][]byte `json:"rawOutputContents"`
	}
	if err := json.Unmarshal(out, &answer); err != nil || answer.ModelName != "tiny-encoder" || len(answer.RawOutputContents) != 1 {
		t.Fatalf("grpcurl's answer: %v\n%s", err, out)
	}
	raw := answer.RawOutputContents[0]
	if len(raw) == 0 || !bytes.HasSuffix(restBody, raw) {
		t.Errorf("grpcurl's embedding (%d bytes) is not the REST answer's binary data", len(raw))
	}
	cmd = exec.Command(bin, "-plaintext", "-d", "@", addr, "inference.GRPCInferenceService/ModelInfer")
	cmd.Stdin = strings.NewReader(docsModelInfer)
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "Unauthenticated") {
		t.Errorf("grpcurl without the token: %v\n%s", err, out)
	}
	if tokens, err := base64.StdEncoding.DecodeString("AQAAAAAAAAACAAAAAAAAAAMAAAAAAAAABAAAAAAAAAA="); err != nil || len(tokens) != 32 ||
		binary.LittleEndian.Uint64(tokens) != 1 || binary.LittleEndian.Uint64(tokens[8:]) != 2 ||
		binary.LittleEndian.Uint64(tokens[16:]) != 3 || binary.LittleEndian.Uint64(tokens[24:]) != 4 {
		t.Errorf("the docs' raw tokens are not [1, 2, 3, 4] as little-endian int64: %v", err)
	}

	// An open realtime session, then SIGTERM: the session ends with
	// Unavailable and wfserve drains and exits 0.
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer sesame")
	st, err := oippb.NewRealtimeInferenceServiceClient(conn).ModelStreamInfer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	speed := binary.LittleEndian.AppendUint32(nil, 0x40400000) // 3.0 as float32
	if err := st.Send(&oippb.ModelStreamInferRequest{Message: &oippb.ModelStreamInferRequest_Start{Start: &oippb.ModelInferRequest{ModelName: "tiny-world",
		Parameters:       map[string]*oippb.InferParameter{"task": {ParameterChoice: &oippb.InferParameter_StringParam{StringParam: "step"}}},
		Inputs:           []*oippb.ModelInferRequest_InferInputTensor{{Name: "speed", Datatype: "FP32", Shape: []int64{1}}},
		RawInputContents: [][]byte{speed}}}}); err != nil {
		t.Fatal(err)
	}
	if msg, err := st.Recv(); err != nil || msg.GetSession() == nil {
		t.Fatalf("the session's first message: %v %v", msg, err)
	}
	if msg, err := st.Recv(); err != nil || msg.GetChunk() == nil || msg.GetChunk().Parameters[oip.ChunkIndex].GetInt64Param() != 0 {
		t.Fatalf("the session's first chunk: %v %v", msg, err)
	}
	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	for {
		_, err := st.Recv()
		if err == nil {
			continue // chunks made before the drain
		}
		if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "shutting down") {
			t.Errorf("the session at SIGTERM: %v", err)
		}
		break
	}
	if code := enginetest.Receive(t, "wfserve to stop after SIGTERM", done); code != 0 {
		t.Errorf("exit %d after SIGTERM:\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "msg=stopped") || !strings.Contains(stderr.String(), `msg="grpc request"`) {
		t.Errorf("no stop record or gRPC access log:\n%s", stderr.String())
	}
}
