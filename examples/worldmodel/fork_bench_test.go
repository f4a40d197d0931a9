package worldmodel

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gen "github.com/worldfoundry/wfgen/generated/worldmodel"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/stream"
)

// livePlayer plays a paced session of the world model and measures its
// key-to-frame: keys pressed at random moments (every 30–170 ms), each
// timed from the press to the release of the first chunk whose step
// started after it (the first frame that can show it).
type livePlayer struct {
	sess *stream.Session

	mu      sync.Mutex
	pending []time.Time     // presses not yet shown
	samples []time.Duration // key-to-frame of the presses shown
	chunks  atomic.Int64
}

// run plays until ctx ends.
func (p *livePlayer) run(ctx context.Context) error {
	go func() {
		r := rand.New(rand.NewPCG(3, 4))
		keys := []string{"up", "down", "left", "right"}
		for ctx.Err() == nil {
			t := time.NewTimer(time.Duration(30+r.IntN(140)) * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			p.mu.Lock()
			p.pending = append(p.pending, time.Now())
			p.mu.Unlock()
			p.sess.SetControls(stream.Controls{keys[r.IntN(4)]: 1})
		}
	}()
	for ch, err := range p.sess.Chunks(ctx) {
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		p.chunks.Add(1)
		started := ch.Ready.Add(-ch.Latency)
		p.mu.Lock()
		for len(p.pending) > 0 && p.pending[0].Before(started) {
			p.samples = append(p.samples, ch.Released.Sub(p.pending[0]))
			p.pending = p.pending[1:]
		}
		p.mu.Unlock()
	}
	return nil
}

// take returns the samples so far and starts anew.
func (p *livePlayer) take() []time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.samples
	p.samples = nil
	return s
}

func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// BenchmarkForks is issue 45's planner: while a player plays a live
// session at 10 fps, a planner snapshots it and forks 8 futures of 16
// steps each (unpaced, their steps batched together by the play task's
// session_batching), again and again. Each iteration is one branching (8
// forks). It reports forks/s and the live player's key-to-frame p50 and
// p99 while forking, beside the same player's alone (3 s before and 3 s
// after the forking, interleaved around it). docs/benchmarks/README.md
// has the figures.
func BenchmarkForks(b *testing.B) {
	root := modelRoot(b)
	// Two calls of sessions' steps side by side, as wfserve -max-concurrent
	// 2 runs them (set WORLDFOUNDRY_TORCH_THREADS=1: one thread a call).
	slots := make(chan struct{}, 2)
	gate := func(ctx context.Context) (func(), error) {
		select {
		case slots <- struct{}{}:
			return func() { <-slots }, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	c, err := client.New(gen.Spec(), client.WithCheckpointRoot(root), client.WithDevice("cpu"), client.WithSessionGate(gate))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	task, err := gen.Spec().Task("play")
	if err != nil {
		b.Fatal(err)
	}
	live, err := c.CallStream(ctx, task, client.Kwargs(task, map[string]any{}))
	if err != nil {
		b.Fatal(err)
	}
	p := &livePlayer{sess: live}
	done := make(chan error, 1)
	go func() { done <- p.run(ctx) }()
	const futures, steps = 8, 16
	alone := func() {
		time.Sleep(3 * time.Second)
	}
	p.take() // the first chunks: loading, warming up
	alone()
	before := p.take()
	forks := 0
	b.ResetTimer()
	for range b.N {
		snap, err := live.Snapshot()
		if err != nil {
			b.Fatal(err)
		}
		branch, err := c.ForkStream(ctx, snap, futures, func(int) []stream.Option {
			return []stream.Option{stream.WithPacing(false), stream.WithMaxChunks(steps)}
		})
		if err != nil {
			b.Fatal(err)
		}
		var wg sync.WaitGroup
		for i, f := range branch {
			wg.Go(func() {
				f.SetControls(stream.Controls{[]string{"up", "down", "left", "right"}[i%4]: 1})
				for _, err := range f.Chunks(ctx) {
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		forks += len(branch)
	}
	b.StopTimer()
	elapsed := b.Elapsed()
	during := p.take()
	alone()
	after := p.take()
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	both := append(before, after...)
	b.ReportMetric(float64(forks)/elapsed.Seconds(), "forks/s")
	b.ReportMetric(float64(quantile(during, 0.5).Microseconds())/1000, "live-p50-ms")
	b.ReportMetric(float64(quantile(during, 0.99).Microseconds())/1000, "live-p99-ms")
	b.ReportMetric(float64(quantile(both, 0.5).Microseconds())/1000, "alone-p50-ms")
	b.ReportMetric(float64(quantile(both, 0.99).Microseconds())/1000, "alone-p99-ms")
	b.Logf("%d forks of %d steps in %v; live key-to-frame over %d presses while forking, %d alone", forks, steps, elapsed.Round(time.Millisecond), len(during), len(both))
}
