package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/worldfoundry/wfgen/examples/tinymodels"
	"github.com/worldfoundry/wfgen/gen/validate"
	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
	"github.com/worldfoundry/wfgen/runtime/torch"
)

// memoryFamilies is how many families TestMemoryBudgetUnderLoad serves
// under a budget that holds two of them.
const memoryFamilies = 5

// memoryVocab is the vocabulary of the encoders of the memory tests: 32Ki
// rows of 64 float32s, an 8 MiB table, so that a module never freed would
// show in the process's resident memory (tiny-encoder's forward takes
// token ids modulo the table's rows, whatever their number).
const memoryVocab = 32 << 10

// encoderSeeded builds a tiny-encoder checkpoint of memoryVocab rows whose
// weights come from seed (the same shapes, so the same file size, for
// every seed).
func encoderSeeded(path string, seed uint64) error {
	r := rand.New(rand.NewPCG(seed, seed+1))
	randn := func(shape ...int64) *tensor.Tensor {
		v := make([]float32, shape[0]*shape[1])
		for i := range v {
			v[i] = float32(r.NormFloat64()) * 0.5
		}
		return tensor.FromFloat32(v, shape...)
	}
	return tinymodels.BuildSource(path, torch.ModuleSource{Source: tinymodels.EncoderSource, Parameters: map[string]*tensor.Tensor{
		"table": randn(memoryVocab, tinymodels.EncoderDim),
		"proj":  randn(tinymodels.EncoderDim, tinymodels.EncoderDim),
	}})
}

// seededEncoders are memoryFamilies tiny-encoder checkpoints of different
// weights, enc-0.pt ..., built once.
var seededEncoders = enginetest.Checkpoints{Name: "wfserve-seeded-encoders", Build: func(dir string) error {
	for i := range memoryFamilies {
		if err := encoderSeeded(filepath.Join(dir, fmt.Sprintf("enc-%d.pt", i)), uint64(100+i)); err != nil {
			return err
		}
	}
	return nil
}}

// memoryRepository makes a repository of memoryFamilies families, enc-0
// ..., each tiny-encoder's manifest under its own id with its own
// checkpoint. It returns the folder and the checkpoints' paths.
func memoryRepository(t *testing.T) (string, []string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "models")
	text, err := os.ReadFile(filepath.Join("..", "..", "manifests", "tiny-encoder.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cks []string
	for i := range memoryFamilies {
		name := fmt.Sprintf("enc-%d", i)
		ck := filepath.Join(dir, name, "checkpoints", "tiny-encoder.pt")
		if err := os.MkdirAll(filepath.Dir(ck), 0o755); err != nil {
			t.Fatal(err)
		}
		s := strings.Replace(string(text), "$schema=../schema/", "$schema=../../schema/", 1)
		s = strings.Replace(s, "model_family_id: tiny-encoder", "model_family_id: "+name, 1)
		if err := os.WriteFile(filepath.Join(dir, name, name+".yaml"), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		replaceFile(t, seededEncoders.Path(t, name+".pt"), ck)
		cks = append(cks, ck)
	}
	return dir, cks
}

// inferModel sends tokens to model and returns its embedding.
func inferModel(hc *http.Client, url, model string, tokens []int64) ([]float32, int, string, error) {
	b, _ := json.Marshal(tokens)
	body := `{"inputs":[{"name":"tokens","datatype":"INT64","shape":[` + strconv.Itoa(len(tokens)) + `],"data":` + string(b) + `}]}`
	resp, err := hc.Post(url+"/v2/models/"+model+"/infer", "application/json", strings.NewReader(body))
	if err != nil {
		return nil, 0, "", err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, 0, "", err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, resp.StatusCode, string(out), nil
	}
	var r struct {
		Outputs []struct {
			Data []float32 `json:"data"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal(out, &r); err != nil || len(r.Outputs) != 1 {
		return nil, resp.StatusCode, string(out), fmt.Errorf("%v: %s", err, out)
	}
	return r.Outputs[0].Data, resp.StatusCode, "", nil
}

// inProcess answers tokens on the checkpoint at path with the in-process
// client: what wfserve must answer, bit for bit.
func inProcess(t *testing.T, path string, tokens []int64) []float32 {
	t.Helper()
	sp := encoderSpec(t)
	c, err := client.New(sp, client.WithCheckpointPath(path), client.WithDevice("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	task := &sp.Tasks[0]
	out, err := c.Call(context.Background(), task, client.Kwargs(task, map[string]any{"tokens": tensor.FromInt64(tokens, int64(len(tokens)))}))
	if err != nil {
		t.Fatal(err)
	}
	v, err := out["embedding"].(*tensor.Tensor).Float32s()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// encoderSpec is tiny-encoder's spec, from its manifest.
func encoderSpec(t *testing.T) *spec.ModelInferenceSpec {
	t.Helper()
	fams, diags, err := validate.Paths([]string{filepath.Join("..", "..", "manifests", "tiny-encoder.yaml")})
	if err != nil || len(diags) > 0 {
		t.Fatal(err, diags)
	}
	return fams[0].Spec
}

// processRSS is the VmRSS of process pid, in bytes.
func processRSS(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/PID/status")
	return 0
}

// metricSum sums the samples of metric in a /metrics text whose labels
// contain match ("" for every sample).
func metricSum(t *testing.T, text, metric, match string) float64 {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + metric + `(\{[^}]*\})? (\S+)$`)
	var sum float64
	found := false
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		if !strings.Contains(m[1], match) {
			continue
		}
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			t.Fatal(err)
		}
		sum += v
		found = true
	}
	if !found {
		t.Fatalf("no %s%s in /metrics:\n%s", metric, match, text)
	}
	return sum
}

// rssMargin is how far the process's resident memory may grow beyond the
// budget while models load and evict: libtorch's own first-use
// initialisation (the JIT's graph executors, the CPU allocator's caches,
// the thread pools' stacks), the Go heap of the requests in flight and the
// collector's headroom — none of which the budget counts, since it
// charges checkpoint bytes only. Generous on purpose, and its limits
// honest: it bounds the process, it does not prove the budget at this
// scale — the five modules together (40 MiB) fit in the margin, and the
// module cache shares one module per checkpoint file, so even evictions
// that never freed would stay below it. What proves the budget is the
// server's accounting and its readiness, checked beside it.
const rssMargin = 256 << 20

// Five families under a budget that holds two of them, a seeded random
// mix of requests from 6 goroutines against wfserve as its own process:
// every request is answered, bit for bit as the in-process client answers
// on that family's checkpoint; the server's own accounting never exceeds
// the budget (scraped while the requests run), nor does it hold more than
// two models ready; the process's VmRSS grows by at most the budget plus
// rssMargin; loads and evictions are counted, per family, in /metrics.
func TestMemoryBudgetUnderLoad(t *testing.T) {
	dir, cks := memoryRepository(t)
	fi, err := os.Stat(cks[0])
	if err != nil {
		t.Fatal(err)
	}
	size := fi.Size()
	budget := 2*size + size/2 // two fit, three do not
	tokens := [][]int64{{3, 1, 4, 1, 5, 9, 2, 6}, {2, 7, 1, 8}, {1, 6, 1, 8, 0, 3, 3, 9, 8, 8, 7}, {32000, 17, 20000, 4096}}
	want := make([][][]float32, memoryFamilies)
	for i, ck := range cks {
		for _, tk := range tokens {
			want[i] = append(want[i], inProcess(t, ck, tk))
		}
	}
	if bitEqual(want[0][0], want[1][0]) {
		t.Fatal("enc-0 and enc-1 answer alike: the test would prove nothing")
	}
	p := startRepository(t, "-repository", dir, "-model-memory", strconv.FormatInt(budget, 10))
	pid := p.cmd.Process.Pid
	base := processRSS(t, pid)
	if m := get(t, p.url+"/metrics"); metricSum(t, m, "wfserve_model_memory_budget_bytes", "") != float64(budget) ||
		metricSum(t, m, "wfserve_model_memory_resident_bytes", "") != 0 {
		t.Errorf("at start: budget or resident bytes wrong:\n%s", m)
	}
	if resp, err := http.Get(p.url + "/v2/health/ready"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("not ready at start: %v %v", resp, err)
	}
	if resp, err := http.Get(p.url + "/v2/models/enc-0/ready"); err != nil || resp.StatusCode == 200 {
		t.Errorf("enc-0 ready before its first request: %v %v", resp, err)
	}

	const goroutines, perGoroutine = 6, 40
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: goroutines}}
	var (
		wg      sync.WaitGroup
		stop    atomic.Bool
		mu      sync.Mutex
		fails   []string
		answers atomic.Int64
		maxUsed float64
		maxRSS  int64
		ready   int
	)
	// The sampler: the server's accounting and the process's RSS while
	// the requests run.
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for !stop.Load() {
			resp, err := http.Get(p.url + "/metrics")
			if err != nil {
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			used := metricSum(t, string(b), "wfserve_model_memory_resident_bytes", "")
			n := int(metricSum(t, string(b), "wfserve_model_ready", ""))
			rss := processRSS(t, pid)
			mu.Lock()
			maxUsed, maxRSS, ready = max(maxUsed, used), max(maxRSS, rss), max(ready, n)
			mu.Unlock()
		}
	}()
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(46, uint64(g)))
			for range perGoroutine {
				fam, tk := r.IntN(memoryFamilies), r.IntN(len(tokens))
				got, code, body, err := inferModel(hc, p.url, fmt.Sprintf("enc-%d", fam), tokens[tk])
				mu.Lock()
				switch {
				case err != nil:
					fails = append(fails, err.Error())
				case code != 200:
					fails = append(fails, fmt.Sprintf("enc-%d: %d %s", fam, code, body))
				case !bitEqual(got, want[fam][tk]):
					fails = append(fails, fmt.Sprintf("enc-%d tokens %d: not the in-process answer", fam, tk))
				default:
					answers.Add(1)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	stop.Store(true)
	<-sampled
	for _, f := range fails {
		t.Error(f)
	}
	if n := answers.Load(); n != goroutines*perGoroutine {
		t.Errorf("%d of %d requests answered right", n, goroutines*perGoroutine)
	}
	m := get(t, p.url+"/metrics")
	loads := metricSum(t, m, "wfserve_model_loads_total", "")
	evictions := metricSum(t, m, "wfserve_model_evictions_total", "")
	used := metricSum(t, m, "wfserve_model_memory_resident_bytes", "")
	t.Logf("%d requests; %v loads, %v evictions; budget %d (checkpoint %d bytes); resident bytes at most %v, now %v; ready models at most %d; VmRSS %d MiB at start, at most %d MiB while serving",
		answers.Load(), loads, evictions, budget, size, maxUsed, used, ready, base>>20, maxRSS>>20)
	if loads <= memoryFamilies-1 || evictions == 0 {
		t.Errorf("%v loads and %v evictions: want more than %d loads and some evictions", loads, evictions, memoryFamilies-1)
	}
	for i := range memoryFamilies {
		if metricSum(t, m, "wfserve_model_loads_total", fmt.Sprintf(`model="enc-%d"`, i)) == 0 {
			t.Errorf("enc-%d never loaded", i)
		}
	}
	if maxUsed > float64(budget) || used > float64(budget) {
		t.Errorf("the server charged %v bytes (now %v), over its budget %d", maxUsed, used, budget)
	}
	if ready > 2 {
		t.Errorf("%d models ready at once under a budget that holds 2", ready)
	}
	if growth := maxRSS - base; growth > budget+rssMargin {
		t.Errorf("VmRSS grew by %d MiB, more than the budget and a margin of %d MiB", growth>>20, rssMargin>>20)
	}
	// Readiness tells the truth: the models charged are those ready.
	for i := range memoryFamilies {
		name := fmt.Sprintf("enc-%d", i)
		charged := metricSum(t, m, "wfserve_model_resident_bytes", `model="`+name+`"`) > 0
		resp, err := http.Get(p.url + "/v2/models/" + name + "/ready")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if (resp.StatusCode == 200) != charged {
			t.Errorf("%s: ready %d, charged %v", name, resp.StatusCode, charged)
		}
	}
	var growth []int64 // what each load added to VmRSS, as wfserve logs it (noisy: other requests run meanwhile)
	for _, m := range regexp.MustCompile(`msg="loaded on request".* rss_growth_bytes=(-?\d+)`).FindAllStringSubmatch(p.stderr.String(), -1) {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		growth = append(growth, n)
	}
	slices.Sort(growth)
	if len(growth) > 0 {
		t.Logf("VmRSS growth of a load as logged (%d loads): min %d KiB, median %d KiB, max %d KiB", len(growth), growth[0]>>10, growth[len(growth)/2]>>10, growth[len(growth)-1]>>10)
	}
	if !strings.Contains(p.stderr.String(), "msg=evicted model=enc-") {
		t.Errorf("no eviction logged:\n%s", p.stderr.String())
	}
	p.stop(t)
}

// A model larger than the whole budget: a pin stops the start with the
// reason; a lazy load is answered 507 with the reason, and the server
// serves on.
func TestMemoryModelLargerThanBudget(t *testing.T) {
	dir, cks := memoryRepository(t)
	fi, err := os.Stat(cks[0])
	if err != nil {
		t.Fatal(err)
	}
	small := strconv.FormatInt(fi.Size()/2, 10)
	cmd := exec.Command(wfserveBin.Path(t, "wfserve"), "-addr", "127.0.0.1:0", "-device", "cpu", "-repository", dir, "-model-memory", small, "-pin-model", "enc-0")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "pinned model enc-0/default") || !strings.Contains(string(out), "-model-memory") {
		t.Errorf("a pin larger than the budget: %v\n%s", err, out)
	}
	p := startRepository(t, "-repository", dir, "-model-memory", small)
	_, code, body, err := inferModel(&http.Client{}, p.url, "enc-1", []int64{1, 2})
	if err != nil || code != http.StatusInsufficientStorage || !strings.Contains(body, "can never be loaded") {
		t.Errorf("a model larger than the budget: %d %s %v", code, body, err)
	}
	if resp, err := http.Get(p.url + "/v2/health/ready"); err != nil || resp.StatusCode != 200 {
		t.Errorf("not ready after a refused load: %v %v", resp, err)
	}
	p.stop(t)
}

// Pins and keep-alive in the process: the pinned family loads at start and
// stays through its idle time; another, idle past -model-keep-alive, is
// unloaded (not ready, evicted in /metrics) and loads again on its next
// request; eight requests at once for a family not loaded load it once.
func TestMemoryPinsAndKeepAlive(t *testing.T) {
	dir, cks := memoryRepository(t)
	p := startRepository(t, "-repository", dir, "-pin-model", "enc-0", "-model-keep-alive", "100ms")
	ready := func(name string) bool {
		resp, err := http.Get(p.url + "/v2/models/" + name + "/ready")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}
	if !ready("enc-0") || ready("enc-1") {
		t.Errorf("at start: enc-0 ready %v (pinned), enc-1 ready %v", ready("enc-0"), ready("enc-1"))
	}
	hc := &http.Client{}
	tk := []int64{4, 2}
	want := inProcess(t, cks[1], tk)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, code, body, err := inferModel(hc, p.url, "enc-1", tk)
			if err != nil || code != 200 || !bitEqual(got, want) {
				t.Errorf("enc-1: %d %s %v", code, body, err)
			}
		}()
	}
	wg.Wait()
	if n := metricSum(t, get(t, p.url+"/metrics"), "wfserve_model_loads_total", `model="enc-1"`); n != 1 {
		t.Errorf("eight requests at once loaded enc-1 %v times, want 1", n)
	}
	enginetest.WaitFor(t, "enc-1 to be unloaded after its keep-alive", func() bool {
		return metricSum(t, get(t, p.url+"/metrics"), "wfserve_model_evictions_total", `model="enc-1"`) == 1
	})
	if ready("enc-1") || !ready("enc-0") {
		t.Errorf("after the keep-alive: enc-1 ready %v, enc-0 (pinned) ready %v", ready("enc-1"), ready("enc-0"))
	}
	if got, code, body, err := inferModel(hc, p.url, "enc-1", tk); err != nil || code != 200 || !bitEqual(got, want) {
		t.Errorf("enc-1 after its eviction: %d %s %v", code, body, err)
	}
	m := get(t, p.url+"/metrics")
	if metricSum(t, m, "wfserve_model_loads_total", `model="enc-1"`) != 2 || metricSum(t, m, "wfserve_model_evictions_total", `model="enc-0"`) != 0 {
		t.Errorf("loads of enc-1 or evictions of the pinned enc-0 wrong:\n%s", m)
	}
	p.stop(t)
}

// Memory management and poll mode together, wfserve as its own process
// under a budget of two and a half checkpoints: tiny-encoder loads on
// its first request; a family added to the repository is not loaded until
// its first request, then charged; tiny-encoder's checkpoint replaced,
// the reload makes room for the new revision beside the serving one by
// evicting the idle added family (the bytes charged never over the
// budget, as sampled), and answers the new checkpoint's bits from
// default@2 once the old revision's bytes are given back; the added family
// loads again on its next request; its manifest removed, it is refused
// 503 and its bytes are given back.
func TestMemoryBudgetWithPoll(t *testing.T) {
	a, b, c := encoders.Path(t, "a.pt"), encoders.Path(t, "b.pt"), encoders.Path(t, "c.pt")
	wantA, wantB, wantC := embedding(t, a), embedding(t, b), embedding(t, c)
	size := func(path string) int64 {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	sa, sb, sc := size(a), size(b), size(c)
	budget := max(sa, sb, sc) * 5 / 2
	dir, manifest, ck := encoderRepository(t, a, nil)
	p := startRepository(t, "-repository", dir, "-model-control", "poll", "-repository-poll-secs", "0.02", "-model-memory", strconv.FormatInt(budget, 10))
	hc := &http.Client{}
	resident := func() float64 {
		return metricSum(t, get(t, p.url+"/metrics"), "wfserve_model_memory_resident_bytes", "")
	}
	answers := func(t *testing.T, model, version string, want []float32) {
		t.Helper()
		if ans, code, msg, err := inferAs(hc, p.url, model); err != nil || code != 200 || ans.version != version || !bitEqual(ans.data, want) {
			t.Errorf("%s: %v %d %s %v, want %s's answer", model, ans.version, code, msg, err, version)
		}
	}
	readiness := func(model string) int {
		code, _ := get2(t, p.url+"/v2/models/"+model+"/ready")
		return code
	}

	// Lazily loaded at its first request.
	if e := entry(repositoryIndex(t, p.url), "tiny-encoder", "default"); e == nil || e.State != "UNAVAILABLE" || !strings.Contains(e.Reason, "loads on its first request") {
		t.Errorf("index before the first request: %+v", e)
	}
	answers(t, "tiny-encoder", "default@1", wantA)
	if got := resident(); got != float64(sa) {
		t.Errorf("resident bytes %v after the first load, want %d", got, sa)
	}

	// Added: listed, not loaded, then loaded by its first request.
	text, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	added := filepath.Join(dir, "enc-added", "enc-added.yaml")
	if err := os.MkdirAll(filepath.Join(dir, "enc-added", "checkpoints"), 0o755); err != nil {
		t.Fatal(err)
	}
	replaceFile(t, b, filepath.Join(dir, "enc-added", "checkpoints", "tiny-encoder.pt"))
	writeFile(t, added, []byte(strings.Replace(string(text), "model_family_id: tiny-encoder", "model_family_id: enc-added", 1)))
	enginetest.WaitFor(t, "enc-added to be added", func() bool {
		return strings.Contains(p.stderr.String(), `msg="added from the repository" model=enc-added`)
	})
	if e := entry(repositoryIndex(t, p.url), "enc-added", "default"); e == nil || e.State != "UNAVAILABLE" || !strings.Contains(e.Reason, "loads on its first request") {
		t.Errorf("index after the add: %+v", e)
	}
	answers(t, "enc-added", "default@1", wantB)
	if got := resident(); got != float64(sa+sb) {
		t.Errorf("resident bytes %v with both loaded, want %d", got, sa+sb)
	}

	// Reloaded: the new revision needs room beside the serving one, and
	// the idle enc-added is evicted for it; the budget holds throughout.
	var (
		stop    atomic.Bool
		maxUsed atomic.Int64
		sampled = make(chan struct{})
	)
	go func() {
		defer close(sampled)
		for !stop.Load() {
			resp, err := hc.Get(p.url + "/metrics")
			if err != nil {
				continue
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if m := regexp.MustCompile(`(?m)^wfserve_model_memory_resident_bytes (\S+)$`).FindStringSubmatch(string(body)); m != nil {
				if v, err := strconv.ParseFloat(m[1], 64); err == nil && int64(v) > maxUsed.Load() {
					maxUsed.Store(int64(v))
				}
			}
		}
	}()
	replaceFile(t, c, ck)
	enginetest.WaitFor(t, "default@2 to answer", func() bool {
		ans, err := infer(hc, p.url)
		return err == nil && ans.version == "default@2"
	})
	answers(t, "tiny-encoder", "default@2", wantC)
	enginetest.WaitFor(t, "default@1 to be freed", func() bool {
		return strings.Contains(p.stderr.String(), `msg="revision freed" model=tiny-encoder version=default@1`)
	})
	stop.Store(true)
	<-sampled
	if s := p.stderr.String(); !strings.Contains(s, "msg=evicted model=enc-added") {
		t.Errorf("enc-added was not evicted for the reload:\n%s", s)
	}
	if code := readiness("enc-added"); code != http.StatusServiceUnavailable {
		t.Errorf("enc-added's readiness after its eviction: %d", code)
	}
	if e := entry(repositoryIndex(t, p.url), "enc-added", "default"); e == nil || !strings.Contains(e.Reason, "evicted") {
		t.Errorf("index after the eviction: %+v", e)
	}
	if got := resident(); got != float64(sc) {
		t.Errorf("resident bytes %v after the reload, want %d (default@2's)", got, sc)
	}
	t.Logf("budget %d; checkpoints %d, %d, %d bytes; resident bytes at most %d while reloading", budget, sa, sb, sc, maxUsed.Load())
	// The sampler may miss the moment both revisions are charged; the
	// eviction above is what shows the new one was charged beside the
	// old (A, B and C together are over the budget).
	if m := maxUsed.Load(); m > budget {
		t.Errorf("resident bytes at most %d while reloading, over the budget %d", m, budget)
	}

	// enc-added loads again; removed, it is refused and its bytes freed.
	answers(t, "enc-added", "default@2", wantB)
	if got := resident(); got != float64(sb+sc) {
		t.Errorf("resident bytes %v, want %d", got, sb+sc)
	}
	if err := os.Remove(added); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitFor(t, "enc-added's bytes to be given back", func() bool { return resident() == float64(sc) })
	if _, code, msg, err := inferAs(hc, p.url, "enc-added"); err != nil || code != http.StatusServiceUnavailable || !strings.Contains(msg, "removed from the repository") {
		t.Errorf("a request for the removed family: %d %s %v", code, msg, err)
	}
	answers(t, "tiny-encoder", "default@2", wantC)
	p.stop(t)
}

// Explicit model control and memory management are refused together, as
// a usage error saying why.
func TestMemoryRefusesExplicitControl(t *testing.T) {
	dir, _, _ := encoderRepository(t, encoders.Path(t, "a.pt"), nil)
	for _, flag := range [][]string{{"-model-memory", "1GiB"}, {"-model-keep-alive", "1m"}, {"-pin-model", "tiny-encoder"}} {
		cmd := exec.Command(wfserveBin.Path(t, "wfserve"), append([]string{"-addr", "127.0.0.1:0", "-device", "cpu", "-repository", dir, "-model-control", "explicit"}, flag...)...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "explicit model control leaves that to the operator's load and unload calls") {
			t.Errorf("%v with -model-control explicit: %v\n%s", flag, err, out)
		}
	}
}
