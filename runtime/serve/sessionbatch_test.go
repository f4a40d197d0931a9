package serve_test

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/worldfoundry/wfgen/examples/tinymodels"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/serve"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// TestSessionBatchingServed plays a session-batched world through wfserve
// with eight players at once, half over WebSocket and half over gRPC, on
// one engine slot (the default): each player's frames equal its frames
// playing alone in process bit for bit (the model writes the size of the
// call's batch into them, so unpadded company would show), and every step
// went through the sessions' queue (wfserve_session_batch_size counts
// them). That the queue puts steps due together into one call is
// TestSessionBatching's (runtime/client); here the log says how many met.
func TestSessionBatchingServed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const players, chunks = 8, 10
	alone := make([][]byte, players)
	in := inProcess(t, "steps-world")
	for p := range players {
		var err error
		if alone[p], err = tinymodels.PlaySteps(ctx, in, p, chunks); err != nil {
			t.Fatal(err)
		}
	}

	s := startFamilies(t, serve.Config{}, loadSpec(t, "steps-world"))
	g := withGRPC(t, s)
	backends := []*remoteBackend{
		{"websocket", remoteClient(t, s, "steps-world")},
		{"grpc", grpcRemote(t, g, "steps-world")},
	}
	got := make([][]byte, players)
	errs := make([]error, players)
	var wg sync.WaitGroup
	for p := range players {
		wg.Go(func() { got[p], errs[p] = tinymodels.PlaySteps(ctx, backends[p%2].c, p, chunks) })
	}
	wg.Wait()
	for p := range players {
		if errs[p] != nil {
			t.Fatalf("%s: %v", backends[p%2].name, errs[p])
		}
		if !bytes.Equal(got[p], alone[p]) {
			t.Errorf("player %d (%s): frames played among %d differ from playing alone in process", p, backends[p%2].name, players)
		}
	}
	// A one-chunk infer of the task (no stream) is a session's first
	// chunk, through the same queue: it held a slot the queue's call then
	// waited for, until the request's deadline.
	first, err := in.Run(ctx, "play", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range backends {
		rc, ok := b.c.(interface {
			Run(context.Context, string, map[string]any, map[string]any, ...client.CallOption) (map[string]any, error)
		})
		if !ok {
			t.Fatalf("%s: no Run", b.name)
		}
		got, err := rc.Run(ctx, "play", nil, nil)
		if err != nil {
			t.Fatalf("%s: one chunk: %v", b.name, err)
		}
		if !tensorsEqual(got["frames"].(*tensor.Tensor), first["frames"].(*tensor.Tensor)) {
			t.Errorf("%s: one chunk differs from in process", b.name)
		}
	}
	fams := scrape(t, s.url, "")
	m := sample(fams, "wfserve_session_batch_size", mt("steps-world", "play"))
	if m == nil {
		t.Fatal("no wfserve_session_batch_size series for steps-world/play")
	}
	h := m.Histogram
	if int(h.GetSampleSum()) != players*chunks+len(backends) {
		t.Errorf("the sessions' calls ran %v steps, want %d", h.GetSampleSum(), players*chunks+len(backends))
	}
	t.Logf("%d steps in %d calls", int(h.GetSampleSum()), h.GetSampleCount())
}

// remoteBackend is a served client and the transport it uses.
type remoteBackend struct {
	name string
	c    tinymodels.Streamer
}
