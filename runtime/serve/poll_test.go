package serve_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/serve"
)

// Poll mode adds a family whose manifest appears in the repository and
// unloads it when it goes, over and over, while clients send requests to
// the family always served, to the one coming and going, and read the
// index and the metrics (run under -race): the family always served
// answers every request, the other answers 200 while present and 503
// (unloaded) or 404 (never added yet) otherwise, and every revision of
// it is freed at the end. Cross-request batching is on, so a family put
// back replaces one whose batchers run.
func TestPollAddsAndRemovesUnderLoad(t *testing.T) {
	t.Parallel()
	dir := tiny.Copy(t)
	manifest := filepath.Join(dir, "enc-2.yaml")
	opts := []client.Option{client.WithCheckpointRoot(dir), client.WithDevice("cpu")}
	var present atomic.Bool
	cfg := serve.Config{ModelControl: serve.ControlPoll, PollInterval: 2 * time.Millisecond, Batching: true,
		Discover: func() ([]string, error) {
			if present.Load() {
				return []string{manifest}, nil
			}
			return nil, nil
		},
		OpenFamily: func(path string) (serve.Family, error) {
			sp := loadSpec(t, "tiny-encoder")
			sp.ModelFamilyID, sp.Aliases = "enc-2", nil
			return serve.Family{Spec: sp, Options: opts, Manifest: path, Repository: dir}, nil
		}}
	if err := os.WriteFile(manifest, []byte("# read by OpenFamily\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fam := serve.Family{Spec: loadSpec(t, "tiny-encoder"), Options: opts}
	s := serveFamilies(t, cfg, fam)

	var (
		stop     atomic.Bool
		wg       sync.WaitGroup
		mu       sync.Mutex
		failures []string
		served   atomic.Int64 // enc-2's 200s
	)
	fail := func(msg string) {
		mu.Lock()
		failures = append(failures, msg)
		mu.Unlock()
	}
	for range 3 {
		wg.Add(3)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if _, _, err := inferEncoder(s.url); err != nil {
					fail("tiny-encoder: " + err.Error())
				}
			}
		}()
		go func() {
			defer wg.Done()
			for !stop.Load() {
				resp, err := http.Post(s.url+"/v2/models/enc-2/infer", "application/json", strings.NewReader(embedBody))
				if err != nil {
					fail(err.Error())
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case 200:
					served.Add(1)
				case 503, 404:
				default:
					fail("enc-2: " + resp.Status + " " + string(b))
				}
			}
		}()
		go func() {
			defer wg.Done()
			for !stop.Load() {
				for _, path := range []string{"/v2/repository/index", "/metrics"} {
					resp, err := http.Post(s.url+path, "application/json", nil)
					if path == "/metrics" {
						resp, err = http.Get(s.url + path)
					}
					if err != nil {
						fail(err.Error())
						continue
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		}()
	}
	state := func() string {
		resp, err := http.Post(s.url+"/v2/repository/index", "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var idx []struct{ Name, State, Reason string }
		if err := json.NewDecoder(resp.Body).Decode(&idx); err != nil {
			t.Fatal(err)
		}
		for _, e := range idx {
			if e.Name == "enc-2" {
				return e.State
			}
		}
		return ""
	}
	for range 4 {
		before := served.Load()
		present.Store(true)
		enginetest.WaitFor(t, "enc-2 to answer", func() bool { return state() == "READY" && served.Load() > before })
		present.Store(false)
		enginetest.WaitFor(t, "enc-2 to be unloaded", func() bool { return state() == "UNAVAILABLE" })
	}
	stop.Store(true)
	wg.Wait()
	for _, f := range failures {
		t.Error(f)
	}
	enginetest.WaitFor(t, "every revision to be freed", func() bool { return s.srv.Stats().DrainingRevisions == 0 })
	adds, removals := 0, 0
	for _, r := range s.logs.all() {
		switch r["msg"] {
		case "added from the repository":
			adds++
		case "removed from the repository: unloaded":
			removals++
		}
	}
	if adds != 4 || removals != 4 {
		t.Errorf("%d adds and %d removals logged, want 4 of each", adds, removals)
	}
}
