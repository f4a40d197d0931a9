package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/oip/oippb"
)

// inferAs sends repoBody to model and returns the answer (version and
// embedding), or the status and body of a refusal.
func inferAs(hc *http.Client, url, model string) (answer, int, string, error) {
	resp, err := hc.Post(url+"/v2/models/"+model+"/infer", "application/json", strings.NewReader(repoBody()))
	if err != nil {
		return answer{}, 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, 0, "", err
	}
	if resp.StatusCode != http.StatusOK {
		return answer{}, resp.StatusCode, string(b), nil
	}
	var r struct {
		ModelVersion string `json:"model_version"`
		Outputs      []struct {
			Data []float32 `json:"data"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal(b, &r); err != nil || len(r.Outputs) != 1 {
		return answer{}, resp.StatusCode, string(b), fmt.Errorf("%v: %s", err, b)
	}
	return answer{r.ModelVersion, r.Outputs[0].Data}, resp.StatusCode, "", nil
}

// indexEntry is one entry of the repository index.
type indexEntry struct {
	Name, Version, State, Reason string
}

// repositoryIndex reads wfserve's repository index.
func repositoryIndex(t *testing.T, url string) []indexEntry {
	t.Helper()
	code, body := post(t, url+"/v2/repository/index", "")
	if code != http.StatusOK {
		t.Fatalf("index: %d %s", code, body)
	}
	var out []indexEntry
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatalf("index: %v: %s", err, body)
	}
	return out
}

// entry returns the index entry named name (and version, when not ""),
// or nil.
func entry(idx []indexEntry, name, version string) *indexEntry {
	for i := range idx {
		if idx[i].Name == name && (version == "" || idx[i].Version == version) {
			return &idx[i]
		}
	}
	return nil
}

// In poll mode a manifest added to the repository is validated and its
// model loaded: it answers bit for bit as the in-process client does on
// its checkpoint. A manifest that is invalid, or names a family already
// served, serves nothing and is listed in the index with its reason (and
// counted), the other models unaffected; fixed, it is added. A manifest
// removed unloads its model: requests are refused 503, the index says
// unloaded, its revision is freed, the server stays ready; put back, the
// family serves again as its next revision.
func TestPollAddsAndRemovesManifests(t *testing.T) {
	a, b := encoders.Path(t, "a.pt"), encoders.Path(t, "b.pt")
	wantA, wantB := embedding(t, a), embedding(t, b)
	dir, manifest, _ := encoderRepository(t, a, nil)
	p := startRepository(t, "-repository", dir, "-model-control", "poll", "-repository-poll-secs", "0.02")
	hc := &http.Client{}
	text, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	// family writes a manifest of tiny-encoder's under id at DIR/folder,
	// its checkpoint ck (if not "") first, edit applied to its text.
	family := func(folder, id, ck string, edit func(string) string) string {
		path := filepath.Join(dir, folder, folder+".yaml")
		if err := os.MkdirAll(filepath.Join(dir, folder, "checkpoints"), 0o755); err != nil {
			t.Fatal(err)
		}
		if ck != "" {
			replaceFile(t, ck, filepath.Join(dir, folder, "checkpoints", "tiny-encoder.pt"))
		}
		s := strings.Replace(string(text), "model_family_id: tiny-encoder", "model_family_id: "+id, 1)
		if edit != nil {
			s = edit(s)
		}
		writeFile(t, path, []byte(s))
		return path
	}
	unaffected := func(t *testing.T) {
		t.Helper()
		if ans, code, msg, err := inferAs(hc, p.url, "tiny-encoder"); err != nil || code != 200 || ans.version != "default@1" || !bitEqual(ans.data, wantA) {
			t.Errorf("tiny-encoder: %v %d %s %v", ans, code, msg, err)
		}
		if code, got := get2(t, p.url+"/v2/health/ready"); code != http.StatusOK {
			t.Errorf("the server is not ready: %d %s", code, got)
		}
	}
	answers := func(t *testing.T, model, version string, want []float32) {
		t.Helper()
		enginetest.WaitFor(t, model+" to answer as "+version, func() bool {
			ans, code, _, err := inferAs(hc, p.url, model)
			return err == nil && code == 200 && ans.version == version && bitEqual(ans.data, want)
		})
	}

	// listed checks whether the OpenAPI document and the playground list
	// the family id.
	listed := func(t *testing.T, id string, want bool) {
		t.Helper()
		if code, doc := get2(t, p.url+"/openapi.json"); code != http.StatusOK || strings.Contains(doc, `"/v2/models/`+id+`/`) != want {
			t.Errorf("/openapi.json lists %s: %v, want %v (%d)", id, !want, want, code)
		}
		if code, desc := get2(t, p.url+"/playground/_/families.json"); code != http.StatusOK || strings.Contains(desc, `"id":"`+id+`"`) != want {
			t.Errorf("the playground's families.json lists %s: %v, want %v (%d)", id, !want, want, code)
		}
		if code, _ := get2(t, p.url+"/playground/"+id); (code == http.StatusOK) != want {
			t.Errorf("the playground's page of %s: %d, want it served: %v", id, code, want)
		}
	}
	listed(t, "tiny-encoder", true)
	listed(t, "enc-added", false)

	// Added: loaded, ready, answering B's bits, listed in the OpenAPI
	// document and the playground.
	added := family("enc-added", "enc-added", b, nil)
	answers(t, "enc-added", "default@1", wantB)
	listed(t, "enc-added", true)
	listed(t, "tiny-encoder", true)
	if e := entry(repositoryIndex(t, p.url), "enc-added", "default"); e == nil || e.State != "READY" {
		t.Errorf("index after the add: %+v", e)
	}
	if s := p.stderr.String(); !strings.Contains(s, "msg=\"added from the repository\" model=enc-added") {
		t.Errorf("the log does not say the model was added:\n%s", s)
	}
	unaffected(t)

	// Invalid, and a second tiny-encoder: nothing served, the reasons
	// listed and counted.
	broken := family("broken", "broken", a, func(s string) string {
		return strings.Replace(s, "max_batch_size: 8", "max_batch_size: -8", 1)
	})
	dup := family("dup", "tiny-encoder", a, nil)
	enginetest.WaitFor(t, "the index to list the bad manifests", func() bool {
		idx := repositoryIndex(t, p.url)
		return entry(idx, broken, "") != nil && entry(idx, dup, "") != nil
	})
	idx := repositoryIndex(t, p.url)
	if e := entry(idx, broken, ""); e.State != "UNAVAILABLE" || !strings.Contains(e.Reason, "serving nothing") || !strings.Contains(e.Reason, "problem(s)") {
		t.Errorf("index for an invalid manifest: %+v", e)
	}
	if e := entry(idx, dup, ""); e.State != "UNAVAILABLE" || !strings.Contains(e.Reason, `two families are named "tiny-encoder"`) {
		t.Errorf("index for a duplicate family: %+v", e)
	}
	if _, code, _, _ := inferAs(hc, p.url, "broken"); code != http.StatusNotFound {
		t.Errorf("a request for the invalid family: %d, want 404", code)
	}
	if m := get(t, p.url+"/metrics"); !strings.Contains(m, "wfserve_repository_invalid_manifests 2\n") {
		t.Errorf("metrics do not count 2 invalid manifests")
	}
	if s := p.stderr.String(); !strings.Contains(s, "a manifest added to the repository serves nothing") {
		t.Errorf("the log does not name the bad manifests:\n%s", s)
	}
	unaffected(t)
	answers(t, "enc-added", "default@1", wantB)

	// Fixed: added; the duplicate removed: no longer listed.
	family("broken", "broken", "", nil)
	if err := os.Remove(dup); err != nil {
		t.Fatal(err)
	}
	answers(t, "broken", "default@1", wantA)
	enginetest.WaitFor(t, "the index to forget the bad manifests", func() bool {
		idx := repositoryIndex(t, p.url)
		return entry(idx, broken, "") == nil && entry(idx, dup, "") == nil
	})
	if m := get(t, p.url+"/metrics"); !strings.Contains(m, "wfserve_repository_invalid_manifests 0\n") {
		t.Errorf("metrics still count invalid manifests")
	}

	// Removed: unloaded, 503, listed as unloaded, its revision freed.
	if err := os.Remove(added); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitFor(t, "enc-added to be unloaded", func() bool {
		e := entry(repositoryIndex(t, p.url), "enc-added", "default")
		return e != nil && e.State == "UNAVAILABLE"
	})
	if e := entry(repositoryIndex(t, p.url), "enc-added", "default"); !strings.Contains(e.Reason, "its manifest was removed from the repository") {
		t.Errorf("index after the removal: %+v", e)
	}
	if _, code, msg, err := inferAs(hc, p.url, "enc-added"); err != nil || code != http.StatusServiceUnavailable || !strings.Contains(msg, "removed from the repository") {
		t.Errorf("a request for the removed family: %d %s %v", code, msg, err)
	}
	if code, _ := get2(t, p.url+"/v2/models/enc-added/ready"); code != http.StatusServiceUnavailable {
		t.Errorf("the removed family's readiness: %d", code)
	}
	listed(t, "enc-added", false)
	listed(t, "broken", true)
	enginetest.WaitFor(t, "enc-added's revision to be freed", func() bool {
		return strings.Contains(p.stderr.String(), "msg=\"revision freed\" model=enc-added version=default@1")
	})
	unaffected(t)
	answers(t, "broken", "default@1", wantA)

	// Back: its next revision.
	family("enc-added", "enc-added", a, nil)
	answers(t, "enc-added", "default@2", wantA)
	listed(t, "enc-added", true)
	unaffected(t)
	p.stop(t)
}

// get2 sends a GET to url and returns the status and body.
func get2(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// A family whose version policy pins it keeps its revision in poll mode:
// its checkpoint replaced, it answers as before from default@1, and the
// log and the index say the new checkpoint is not loaded.
func TestPollPinnedVersionPolicy(t *testing.T) {
	a, b := encoders.Path(t, "a.pt"), encoders.Path(t, "b.pt")
	wantA := embedding(t, a)
	dir, _, ck := encoderRepository(t, a, func(s string) string {
		return strings.Replace(s, "model_family_id: tiny-encoder", "model_family_id: tiny-encoder\nversion_policy:\n  pinned: true", 1)
	})
	p := startRepository(t, "-repository", dir, "-model-control", "poll", "-repository-poll-secs", "0.02")
	hc := &http.Client{}
	replaceFile(t, b, ck)
	sumB := sha256File(t, b)
	enginetest.WaitFor(t, "the change to be held", func() bool {
		return strings.Contains(p.stderr.String(), "version policy pins the serving version")
	})
	if e := entry(repositoryIndex(t, p.url), "tiny-encoder", "default"); e == nil || e.State != "READY" ||
		!strings.Contains(e.Reason, "serving default@1") || !strings.Contains(e.Reason, "pinned by its version policy") || !strings.Contains(e.Reason, sumB) {
		t.Errorf("index: %+v", e)
	}
	if ans, err := infer(hc, p.url); err != nil || ans.version != "default@1" || !bitEqual(ans.data, wantA) {
		t.Errorf("after the change: %v %v", ans, err)
	}
	if strings.Contains(p.stderr.String(), "msg=reloaded") {
		t.Errorf("a pinned family was reloaded:\n%s", p.stderr.String())
	}
	p.stop(t)
}

// inferVersion sends repoBody to tiny-encoder's version (VARIANT or
// VARIANT@N) over REST.
func inferVersion(hc *http.Client, url, version string) (answer, int, string, error) {
	return inferAs(hc, url, "tiny-encoder/versions/"+version)
}

// grpcInfer sends repoTokens to tiny-encoder's version over gRPC's
// ModelInfer and returns the answer, or the call's error.
func grpcInfer(t *testing.T, c oippb.GRPCInferenceServiceClient, version string) (answer, error) {
	t.Helper()
	raw := make([]byte, 0, 8*len(repoTokens))
	for _, v := range repoTokens {
		raw = binary.LittleEndian.AppendUint64(raw, uint64(v))
	}
	resp, err := c.ModelInfer(context.Background(), &oippb.ModelInferRequest{ModelName: "tiny-encoder", ModelVersion: version,
		Inputs:           []*oippb.ModelInferRequest_InferInputTensor{{Name: "tokens", Datatype: "INT64", Shape: []int64{int64(len(repoTokens))}}},
		RawInputContents: [][]byte{raw}})
	if err != nil {
		return answer{}, err
	}
	if len(resp.RawOutputContents) != 1 || len(resp.RawOutputContents[0])%4 != 0 {
		t.Fatalf("gRPC answer: %v", resp)
	}
	b := resp.RawOutputContents[0]
	data := make([]float32, len(b)/4)
	for i := range data {
		data[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return answer{resp.ModelVersion, data}, nil
}

// A family whose version policy keeps the latest 2 revisions, its
// checkpoint replaced twice in poll mode (A, then B, then C): the two
// newest revisions both answer, each bit for bit its own checkpoint's
// answer, over REST and gRPC (default@3 as "default" and as no version,
// default@2 when named); each is ready and listed in the index; the
// oldest, default@1, is retired — drained and freed — and a request or a
// readiness check naming it is refused 404 with the versions served.
func TestPollLatestVersionPolicy(t *testing.T) {
	a, b, c := encoders.Path(t, "a.pt"), encoders.Path(t, "b.pt"), encoders.Path(t, "c.pt")
	wantA, wantB, wantC := embedding(t, a), embedding(t, b), embedding(t, c)
	if bitEqual(wantA, wantB) || bitEqual(wantB, wantC) || bitEqual(wantA, wantC) {
		t.Fatal("the checkpoints answer alike")
	}
	dir, _, ck := encoderRepository(t, a, func(s string) string {
		return strings.Replace(s, "model_family_id: tiny-encoder", "model_family_id: tiny-encoder\nversion_policy:\n  latest: 2", 1)
	})
	p := startRepository(t, "-repository", dir, "-model-control", "poll", "-repository-poll-secs", "0.02", "-grpc-addr", "127.0.0.1:0")
	hc := &http.Client{}
	conn, err := grpc.NewClient(p.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	gc := oippb.NewGRPCInferenceServiceClient(conn)
	answers := func(t *testing.T, version, named string, want []float32) {
		t.Helper()
		ans, code, msg, err := inferVersion(hc, p.url, version)
		if err != nil || code != 200 || ans.version != named || !bitEqual(ans.data, want) {
			t.Errorf("REST version %q: %v %d %s %v, want %s's answer", version, ans.version, code, msg, err, named)
		}
		if ans, err := grpcInfer(t, gc, version); err != nil || ans.version != named || !bitEqual(ans.data, want) {
			t.Errorf("gRPC version %q: %v %v, want %s's answer", version, ans.version, err, named)
		}
	}
	ready := func(t *testing.T, version string) {
		t.Helper()
		if code, body := get2(t, p.url+"/v2/models/tiny-encoder/versions/"+version+"/ready"); code != http.StatusOK || !strings.Contains(body, `"version":"`+version+`"`) {
			t.Errorf("readiness of %s: %d %s", version, code, body)
		}
		if r, err := gc.ModelReady(context.Background(), &oippb.ModelReadyRequest{Name: "tiny-encoder", Version: version}); err != nil || !r.GetReady() {
			t.Errorf("gRPC readiness of %s: %v %v", version, r, err)
		}
	}
	answers(t, "default", "default@1", wantA)

	// B: default@2 is the newest, default@1 kept.
	replaceFile(t, b, ck)
	enginetest.WaitFor(t, "default@2 to answer", func() bool {
		ans, err := infer(hc, p.url)
		return err == nil && ans.version == "default@2"
	})
	answers(t, "default", "default@2", wantB)
	answers(t, "default@1", "default@1", wantA)
	answers(t, "default@2", "default@2", wantB)
	ready(t, "default@1")

	// C: default@3 the newest, default@2 kept, default@1 retired.
	replaceFile(t, c, ck)
	enginetest.WaitFor(t, "default@3 to answer", func() bool {
		ans, err := infer(hc, p.url)
		return err == nil && ans.version == "default@3"
	})
	if ans, err := infer(hc, p.url); err != nil || ans.version != "default@3" || !bitEqual(ans.data, wantC) {
		t.Errorf("no version: %v %v, want default@3's answer", ans, err)
	}
	answers(t, "default", "default@3", wantC)
	answers(t, "default@3", "default@3", wantC)
	answers(t, "default@2", "default@2", wantB)
	ready(t, "default@2")
	ready(t, "default@3")
	ready(t, "default")

	// default@1: retired, freed, refused with the versions served.
	enginetest.WaitFor(t, "default@1 to be freed", func() bool {
		return strings.Contains(p.stderr.String(), "msg=\"revision freed\" model=tiny-encoder version=default@1")
	})
	if s := p.stderr.String(); !strings.Contains(s, `msg="retired by the version policy" model=tiny-encoder version=default@1 latest=2 newest=default@3`) {
		t.Errorf("the log does not say default@1 was retired:\n%s", s)
	}
	if strings.Contains(p.stderr.String(), "msg=\"revision freed\" model=tiny-encoder version=default@2\n") {
		t.Errorf("default@2 was freed:\n%s", p.stderr.String())
	}
	_, code, msg, err := inferVersion(hc, p.url, "default@1")
	if err != nil || code != http.StatusNotFound || !strings.Contains(msg, `no version \"default@1\"`) || !strings.Contains(msg, "default@3") || !strings.Contains(msg, "default@2") {
		t.Errorf("REST default@1: %d %s %v", code, msg, err)
	}
	if _, err := grpcInfer(t, gc, "default@1"); status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), "versions served: default@3") {
		t.Errorf("gRPC default@1: %v", err)
	}
	if code, body := get2(t, p.url+"/v2/models/tiny-encoder/versions/default@1/ready"); code != http.StatusNotFound {
		t.Errorf("readiness of default@1: %d %s", code, body)
	}
	hc2 := healthpb.NewHealthClient(conn)
	for service, want := range map[string]healthpb.HealthCheckResponse_ServingStatus{
		"tiny-encoder/default@1": healthpb.HealthCheckResponse_NOT_SERVING,
		"tiny-encoder/default@2": healthpb.HealthCheckResponse_SERVING,
		"tiny-encoder/default@3": healthpb.HealthCheckResponse_SERVING,
	} {
		if r, err := hc2.Check(context.Background(), &healthpb.HealthCheckRequest{Service: service}); err != nil || r.GetStatus() != want {
			t.Errorf("gRPC health of %s: %v %v, want %v", service, r.GetStatus(), err, want)
		}
	}
	if _, code, msg, _ := inferVersion(hc, p.url, "default@4"); code != http.StatusNotFound || !strings.Contains(msg, "versions served") {
		t.Errorf("REST default@4: %d %s", code, msg)
	}

	// The index: the newest as "default", default@2 beside it, no default@1.
	idx := repositoryIndex(t, p.url)
	if e := entry(idx, "tiny-encoder", "default"); e == nil || e.State != "READY" || !strings.Contains(e.Reason, "serving default@3") ||
		!strings.Contains(e.Reason, sha256File(t, c)) || !strings.Contains(e.Reason, "also serving default@2") {
		t.Errorf("index, default: %+v", e)
	}
	if e := entry(idx, "tiny-encoder", "default@2"); e == nil || e.State != "READY" || !strings.Contains(e.Reason, sha256File(t, b)) {
		t.Errorf("index, default@2: %+v", e)
	}
	if e := entry(idx, "tiny-encoder", "default@1"); e != nil {
		t.Errorf("index lists the retired default@1: %+v", e)
	}
	p.stop(t)
}

// With explicit model control a load of a changed checkpoint follows the
// version policy too: under latest: 2 the replaced revision keeps
// answering when named, and an unload retires and frees every revision
// (a request naming one is then refused 404, none being served).
func TestExplicitLatestVersionPolicy(t *testing.T) {
	a, b := encoders.Path(t, "a.pt"), encoders.Path(t, "b.pt")
	wantA, wantB := embedding(t, a), embedding(t, b)
	dir, _, ck := encoderRepository(t, a, func(s string) string {
		return strings.Replace(s, "model_family_id: tiny-encoder", "model_family_id: tiny-encoder\nversion_policy:\n  latest: 2", 1)
	})
	p := startRepository(t, "-repository", dir, "-model-control", "explicit", "-load-model", "tiny-encoder")
	hc := &http.Client{}
	replaceFile(t, b, ck)
	if code, msg := post(t, p.url+"/v2/repository/models/tiny-encoder/load", ""); code != 200 {
		t.Fatalf("load of the changed model: %d %s", code, msg)
	}
	for version, want := range map[string]answer{"default": {"default@2", wantB}, "default@2": {"default@2", wantB}, "default@1": {"default@1", wantA}} {
		if ans, code, msg, err := inferVersion(hc, p.url, version); err != nil || code != 200 || ans.version != want.version || !bitEqual(ans.data, want.data) {
			t.Errorf("version %q: %v %d %s %v, want %s's answer", version, ans.version, code, msg, err, want.version)
		}
	}
	if code, msg := post(t, p.url+"/v2/repository/models/tiny-encoder/unload", ""); code != 200 {
		t.Fatalf("unload: %d %s", code, msg)
	}
	for _, version := range []string{"default@1", "default@2"} {
		enginetest.WaitFor(t, version+" to be freed", func() bool {
			return strings.Contains(p.stderr.String(), `msg="revision freed" model=tiny-encoder version=`+version+"\n")
		})
		if _, code, msg, _ := inferVersion(hc, p.url, version); code != http.StatusNotFound || !strings.Contains(msg, "it is not loaded") {
			t.Errorf("version %q after the unload: %d %s", version, code, msg)
		}
	}
	if !strings.Contains(get(t, p.url+"/metrics"), "wfserve_model_revisions_draining 0\n") {
		t.Error("revisions still draining after the unload")
	}
	p.stop(t)
}
