package serve_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/worldfoundry/wfgen/examples/tinymodels"
	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/oip"
	"github.com/worldfoundry/wfgen/runtime/oip/oippb"
	"github.com/worldfoundry/wfgen/runtime/serve"
	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
	"github.com/worldfoundry/wfgen/runtime/torch"
)

// otherEncoder builds a tiny-encoder checkpoint with weights of its own
// at path.
func otherEncoder(path string) error {
	r := rand.New(rand.NewPCG(7, 8))
	randn := func(rows, cols int64) *tensor.Tensor {
		v := make([]float32, rows*cols)
		for i := range v {
			v[i] = float32(r.NormFloat64()) * 0.5
		}
		return tensor.FromFloat32(v, rows, cols)
	}
	return tinymodels.BuildSource(path, torch.ModuleSource{Source: tinymodels.EncoderSource, Parameters: map[string]*tensor.Tensor{
		"table": randn(tinymodels.EncoderVocab, tinymodels.EncoderDim),
		"proj":  randn(tinymodels.EncoderDim, tinymodels.EncoderDim),
	}})
}

// swapIn replaces dst with src's bytes atomically.
func swapIn(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst+".tmp", b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(dst+".tmp", dst); err != nil {
		t.Fatal(err)
	}
}

// In poll mode with cross-request batching, clients keep sending while
// the encoder's checkpoint is replaced, alternating two: no request
// fails, and every revision answers one embedding — odd revisions A's,
// even ones B's, the two different. Under -race it checks the revision's
// pin, swap and drain against the request, batch and poll goroutines.
func TestPollSwapsUnderLoad(t *testing.T) {
	t.Parallel()
	dir := tiny.Copy(t)
	ck := filepath.Join(dir, "checkpoints", "tiny-encoder.pt")
	a := filepath.Join(t.TempDir(), "a.pt")
	swapIn(t, ck, a)
	b := filepath.Join(t.TempDir(), "b.pt")
	if err := otherEncoder(b); err != nil {
		t.Fatal(err)
	}
	fam := serve.Family{Spec: loadSpec(t, "tiny-encoder"), Options: []client.Option{client.WithCheckpointRoot(dir), client.WithDevice("cpu")}}
	s := serveFamilies(t, serve.Config{ModelControl: serve.ControlPoll, PollInterval: 5 * time.Millisecond, Batching: true, BatchInvariant: true, MaxConcurrent: 2}, fam)

	const clients, swaps = 8, 6
	var (
		stop     atomic.Bool
		wg       sync.WaitGroup
		mu       sync.Mutex
		seen     = map[string]string{} // version → its embedding's JSON
		failures []string
	)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				version, out, err := inferEncoder(s.url)
				mu.Lock()
				switch {
				case err != nil:
					failures = append(failures, err.Error())
				case seen[version] == "":
					seen[version] = out
				case seen[version] != out:
					failures = append(failures, version+" answered two embeddings")
				}
				mu.Unlock()
			}
		}()
	}
	for i := range swaps {
		swapIn(t, []string{b, a}[i%2], ck)
		version := "default@" + strconv.Itoa(i+2)
		enginetest.WaitFor(t, version+" to answer", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return seen[version] != ""
		})
	}
	stop.Store(true)
	wg.Wait()
	for _, f := range failures {
		t.Error(f)
	}
	for version, out := range seen {
		n, err := strconv.Atoi(strings.TrimPrefix(version, "default@"))
		if err != nil {
			t.Fatalf("model_version %q", version)
		}
		if want := seen["default@"+strconv.Itoa(2-n%2)]; out != want {
			t.Errorf("%s answered %s, want %s", version, out, want)
		}
	}
	if seen["default@1"] == seen["default@2"] {
		t.Error("checkpoints A and B answered alike")
	}
	enginetest.WaitFor(t, "the old revisions to be freed", func() bool { return s.srv.Stats().DrainingRevisions == 0 })
}

// Under version_policy latest: 2 with cross-request batching, clients
// send at once to default@1, default@2 and no version while a third
// checkpoint is swapped in: every answer names the version it was asked
// for (the newest for no version) and is that revision's embedding, so no
// batch mixed two revisions; default@1, retired by the swap, answers or
// is refused 404 naming the versions served, and is freed.
func TestPollLatestVersionsUnderLoad(t *testing.T) {
	t.Parallel()
	dir := tiny.Copy(t)
	ck := filepath.Join(dir, "checkpoints", "tiny-encoder.pt")
	a := filepath.Join(t.TempDir(), "a.pt")
	swapIn(t, ck, a)
	b := filepath.Join(t.TempDir(), "b.pt")
	if err := otherEncoder(b); err != nil {
		t.Fatal(err)
	}
	sp := loadSpec(t, "tiny-encoder")
	sp.VersionPolicy = &spec.VersionPolicySpec{Latest: 2}
	fam := serve.Family{Spec: sp, Options: []client.Option{client.WithCheckpointRoot(dir), client.WithDevice("cpu")}}
	s := serveFamilies(t, serve.Config{ModelControl: serve.ControlPoll, PollInterval: 5 * time.Millisecond, Batching: true, BatchInvariant: true, MaxConcurrent: 2}, fam)
	_, wantA, err := inferEncoderAt(s.url, "")
	if err != nil {
		t.Fatal(err)
	}
	swapIn(t, b, ck)
	enginetest.WaitFor(t, "default@2 to answer", func() bool {
		v, _, err := inferEncoderAt(s.url, "")
		return err == nil && v == "default@2"
	})
	_, wantB, err := inferEncoderAt(s.url, "default@2")
	if err != nil || wantA == wantB {
		t.Fatalf("B: %v, or A and B answer alike", err)
	}
	want := map[string]string{"default@1": wantA, "default@2": wantB, "default@3": wantA}
	g := withGRPC(t, s)
	listed(t, g, "default", "default@1")

	var (
		stop     atomic.Bool
		wg       sync.WaitGroup
		mu       sync.Mutex
		failures []string
		answered = map[string]int{}
	)
	for i := range 9 {
		asked := []string{"default@1", "default@2", ""}[i%3]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				version, out, err := inferEncoderAt(s.url, asked)
				mu.Lock()
				switch {
				case err != nil && asked == "default@1" && strings.HasPrefix(err.Error(), "404 ") && strings.Contains(err.Error(), "versions served: default@3"):
					answered["default@1 retired"]++ // retired by the swap
				case err != nil:
					failures = append(failures, fmt.Sprintf("version %q: %v", asked, err))
				case asked != "" && version != asked, asked == "" && version != "default@2" && version != "default@3":
					failures = append(failures, fmt.Sprintf("version %q answered by %s", asked, version))
				case out != want[version]:
					failures = append(failures, fmt.Sprintf("version %q: %s answered another revision's embedding", asked, version))
				default:
					answered[version]++
				}
				mu.Unlock()
			}
		}()
	}
	enginetest.WaitFor(t, "both versions to answer", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return answered["default@1"] > 0 && answered["default@2"] > 0
	})
	swapIn(t, a, ck)
	enginetest.WaitFor(t, "default@3 to answer and default@1 to be refused", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return answered["default@3"] > 0 && answered["default@1 retired"] > 0
	})
	stop.Store(true)
	wg.Wait()
	for _, f := range failures {
		t.Error(f)
	}
	t.Logf("answers: %v", answered)
	listed(t, g, "default", "default@2")
	enginetest.WaitFor(t, "default@1 to be freed", func() bool { return s.srv.Stats().DrainingRevisions == 0 })
}

// listed checks that tiny-encoder's metadata (REST and gRPC) lists
// exactly versions, and that the health service lists each as serving
// and no other version of it.
func listed(t *testing.T, g *grpcStarted, versions ...string) {
	t.Helper()
	code, _, body := call(t, "GET", g.url+"/v2/models/tiny-encoder", "")
	var md oip.ModelMetadata
	if code != 200 || json.Unmarshal(body, &md) != nil {
		t.Fatalf("metadata: %d %s", code, body)
	}
	if !slices.Equal(md.Versions, versions) {
		t.Errorf("REST metadata lists versions %q, want %q", md.Versions, versions)
	}
	ctx := context.Background()
	gm, err := g.oip.ModelMetadata(ctx, &oippb.ModelMetadataRequest{Name: "tiny-encoder"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(gm.Versions, versions) {
		t.Errorf("gRPC metadata lists versions %q, want %q", gm.Versions, versions)
	}
	list, err := healthpb.NewHealthClient(g.conn).List(ctx, &healthpb.HealthListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for name, st := range list.Statuses {
		if v, ok := strings.CutPrefix(name, "tiny-encoder/"); ok {
			got = append(got, v)
			if st.Status != healthpb.HealthCheckResponse_SERVING {
				t.Errorf("health lists %s as %v", name, st.Status)
			}
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, versions) {
		t.Errorf("health lists versions %q, want %q", got, versions)
	}
}

// inferEncoder sends one embed request and returns the version that
// answered and its outputs as JSON.
func inferEncoder(url string) (version, outputs string, err error) { return inferEncoderAt(url, "") }

// inferEncoderAt sends one embed request to version ("": none) and
// returns the version that answered and its outputs as JSON; an error
// starting with the status for a refusal.
func inferEncoderAt(url, version string) (string, string, error) {
	path := "/v2/models/tiny-encoder/infer"
	if version != "" {
		path = "/v2/models/tiny-encoder/versions/" + version + "/infer"
	}
	resp, err := http.Post(url+path, "application/json", strings.NewReader(embedBody))
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", "", err
	}
	if resp.StatusCode != 200 {
		return "", "", fmt.Errorf("%d %s", resp.StatusCode, body)
	}
	var r struct {
		ModelVersion string          `json:"model_version"`
		Outputs      json.RawMessage `json:"outputs"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return "", "", err
	}
	return r.ModelVersion, string(r.Outputs), nil
}

// A realtime session keeps the revision it opened on through a reload:
// its chunks name it while new requests get the new one, and the old
// revision is freed only when the session ends.
func TestSessionKeepsItsRevision(t *testing.T) {
	t.Parallel()
	dir := tiny.Copy(t)
	fam := serve.Family{Spec: loadSpec(t, "tiny-world"), Options: []client.Option{client.WithCheckpointRoot(dir), client.WithDevice("cpu")}}
	s := serveFamilies(t, serve.Config{ModelControl: serve.ControlPoll, PollInterval: 5 * time.Millisecond}, fam)
	body := `{"parameters":{"task":"step","paced":true},"inputs":[{"name":"speed","datatype":"FP32","shape":[1],"data":[1]}]}`
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", s.url+"/v2/models/tiny-world/infer", strings.NewReader(body))
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	chunkVersion := func() string {
		t.Helper()
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				t.Fatalf("reading events: %v", err)
			}
			if data, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(data, `"model_version"`) {
				var c struct {
					ModelVersion string `json:"model_version"`
				}
				if err := json.Unmarshal([]byte(data), &c); err != nil {
					t.Fatal(err)
				}
				return c.ModelVersion
			}
		}
	}
	if v := chunkVersion(); v != "default@1" {
		t.Fatalf("first chunk from %s", v)
	}
	// Another world (other frequencies) in place of the checkpoint.
	if err := tinymodels.BuildSource(filepath.Join(dir, "checkpoints", "tiny-world.pt"), torch.ModuleSource{Source: tinymodels.WorldSource,
		Parameters: map[string]*tensor.Tensor{"freq": tensor.FromFloat32([]float32{0.3, 0.1, 0.4}, 3)}}); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitFor(t, "default@2 to serve", func() bool {
		return strings.HasPrefix(repositoryIndex(t, s.url)["tiny-world"].Reason, "serving default@2")
	})
	worldBody := `{"inputs":[{"name":"prompt","datatype":"BYTES","shape":[1],"data":["a red fox"]},{"name":"num_frames","datatype":"INT64","shape":[1],"data":[1]},{"name":"height","datatype":"INT64","shape":[1],"data":[16]},{"name":"width","datatype":"INT64","shape":[1],"data":[16]}]}`
	if code, _, b := post(t, s.url+"/v2/models/tiny-world/infer", worldBody); code != 200 || !strings.Contains(string(b), `"model_version":"default@2"`) {
		t.Errorf("a request after the reload: %d %.200s", code, b)
	}
	for range 3 {
		if v := chunkVersion(); v != "default@1" {
			t.Fatalf("a chunk after the reload from %s, want the session's default@1", v)
		}
	}
	if n := s.srv.Stats().DrainingRevisions; n != 1 {
		t.Errorf("%d revisions draining while the session runs, want 1", n)
	}
	cancel()
	enginetest.WaitFor(t, "default@1 to be freed", func() bool { return s.srv.Stats().DrainingRevisions == 0 })
}
