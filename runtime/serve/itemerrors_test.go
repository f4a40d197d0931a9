package serve_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/batch"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/remote"
	"github.com/worldfoundry/wfgen/runtime/serve"
	"github.com/worldfoundry/wfgen/runtime/torch"

	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// pickySource is a batchable TorchScript encoder that fails on any batch
// holding the token 666 (it then indexes its one-element scale at 7): an
// item that fails on its own, whatever batch it is in.
const pickySource = `
def forward(self, tokens: Tensor) -> Tensor:
    at = (tokens == 666).any().long().view(1) * 7
    return tokens.float().mean(dim=-1, keepdim=True) * torch.index_select(self.scale, 0, at)
`

// pickyMessage is what libtorch says when it fails.
const pickyMessage = "out of range"

// TestBatchedItemErrorsGoToTheirRequests runs concurrent requests through
// the cross-request batcher while some carry a token the model refuses: the
// batch executor isolates them, each gets its own 500 with the model's
// message, every other request its own result. The remote RunBatch with
// WithPerItemErrors reports exactly those items.
func TestBatchedItemErrorsGoToTheirRequests(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "picky.pt")
	if err := torch.BuildModule(torch.ModuleSource{Source: pickySource,
		Parameters: map[string]*tensor.Tensor{"scale": tensor.FromFloat32([]float32{2}, 1)}}, path); err != nil {
		t.Fatal(err)
	}
	spec := &spec.ModelInferenceSpec{
		ModelFamilyID: "picky", DefaultVariantID: "default", DefaultTaskID: "embed",
		Variants: []spec.InferenceVariantSpec{{VariantID: "default", Checkpoints: []spec.InferenceCheckpointRef{{Role: "model", URI: path}}}},
		Tasks: []spec.InferenceTaskProfile{{TaskID: "embed",
			Batching: &spec.BatchingSpec{MaxBatchSize: 8},
			Inputs:   []spec.InferenceFieldSpec{{FieldID: "tokens", Kind: spec.KindTensor, Target: spec.TargetCallKwargs, Required: true}},
			Outputs:  []spec.InferenceArtifactSpec{{ArtifactID: "score", Kind: spec.ArtifactTensor, Required: true}},
		}},
	}
	logs := &logSink{}
	// The first request's call is held in the engine until every request
	// is admitted, so that the others queue and are batched.
	eng, gate := gated(t)
	defer gate.Open()
	srv, err := serve.New(serve.Config{Batching: true, BatchDelay: 100 * time.Millisecond, Logger: slog.New(slog.NewJSONHandler(logs, nil))},
		serve.Family{Spec: spec, Options: []client.Option{client.WithDevice("cpu"), client.WithEngine(eng)}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := srv.Load(); err != nil {
		t.Fatal(err)
	}
	handling := &inflight{h: srv}
	hs := httptest.NewServer(handling)
	defer hs.Close()
	rc, err := remote.New(spec, hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	bad := map[int]bool{3: true, 10: true, 11: true}
	item := func(i int) map[string]any {
		tok := int64(i)
		if bad[i] {
			tok = 666
		}
		return map[string]any{"tokens": tensor.FromInt64([]int64{tok, 1, 2, 3}, 4)}
	}
	const n = 16
	var wg sync.WaitGroup
	errs := make([]error, n)
	outs := make([]map[string]any, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = rc.Run(context.Background(), "embed", item(i), nil)
		}()
	}
	gate.Entered(t)
	enginetest.WaitFor(t, "every request to be admitted", func() bool { return srv.Stats().Admitted == n })
	gate.Open()
	wg.Wait()
	for i := range n {
		var se *remote.StatusError
		if bad[i] {
			if !errors.As(errs[i], &se) || se.Status != http.StatusInternalServerError || !strings.Contains(se.Message, pickyMessage) {
				t.Errorf("request %d: %v, want its own 500 with the model's message", i, errs[i])
			}
			continue
		}
		if errs[i] != nil {
			t.Errorf("request %d: %v", i, errs[i])
			continue
		}
		v, _ := outs[i]["score"].(*tensor.Tensor).Float32s()
		if want := float32(i+6) / 4 * 2; len(v) != 1 || v[0] != want {
			t.Errorf("request %d: score %v, want %v", i, v, want)
		}
	}
	if st := srv.Stats(); st.Batches >= n {
		t.Errorf("stats %+v: requests were not batched", st)
	}

	items := make([]map[string]any, n)
	for i := range items {
		items[i] = item(i)
	}
	res, err := rc.RunBatch(context.Background(), "embed", items, batch.WithPerItemErrors())
	var ie batch.ItemErrors
	if !errors.As(err, &ie) || len(ie) != 3 || ie[0].Index != 3 || ie[1].Index != 10 || ie[2].Index != 11 {
		t.Fatalf("RunBatch per-item errors: %v", err)
	}
	for i, out := range res {
		if (out == nil) != bad[i] {
			t.Errorf("RunBatch item %d: output %v", i, out)
		}
	}
	if _, err := rc.RunBatch(context.Background(), "embed", items); err == nil || !strings.Contains(err.Error(), pickyMessage) {
		t.Errorf("RunBatch without per-item errors: %v", err)
	}
	// The requests the failed RunBatch abandoned are logged as such, not
	// as answered (once their handlers have returned).
	enginetest.WaitFor(t, "the abandoned requests' handlers to return", func() bool { return handling.n.Load() == 0 })
	for _, r := range logs.all() {
		if r["status"] == 200.0 && r["bytes"] == 0.0 {
			t.Errorf("an unanswered request logged as 200: %v", r)
		}
	}
}
