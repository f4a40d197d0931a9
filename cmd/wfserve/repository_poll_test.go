package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/internal/enginetest"
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

	// Added: loaded, ready, answering B's bits.
	added := family("enc-added", "enc-added", b, nil)
	answers(t, "enc-added", "default@1", wantB)
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
	enginetest.WaitFor(t, "enc-added's revision to be freed", func() bool {
		return strings.Contains(p.stderr.String(), "msg=\"revision freed\" model=enc-added version=default@1")
	})
	unaffected(t)
	answers(t, "broken", "default@1", wantA)

	// Back: its next revision.
	family("enc-added", "enc-added", a, nil)
	answers(t, "enc-added", "default@2", wantA)
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
