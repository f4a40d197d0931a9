// Command binbench is the JSON vs binary tensor benchmark of `make bench`:
// it starts wfserve (built from ./cmd/wfserve) on a loopback port serving
// the image classifier of runtime/serve/internal/imagemodel (a float32
// [3, 224, 224] image in, ten logits out) and the demo's tiny world (a
// text-to-video task whose clip of -frames frames at 128×128 is the
// output), and drives both through the remote client the generated clients
// wrap (runtime/remote) — with tensors as JSON numbers
// (remote.WithJSONTensors) and with the binary tensor data extension (the
// default) — from 1 and 4 concurrent clients. Before measuring it checks
// that both modes answer the same bytes as the in-process client would
// (the first binary answer against the first JSON one). Windows of the two
// modes are interleaved round after round, so that load from elsewhere on
// the machine falls on both alike; it prints req/s, p50 latency, the bytes
// on the wire per request (HTTP headers and bodies, both directions,
// counted on the client's connections) and the ratios.
//
// It is bounded: every window lasts -window and it runs -rounds rounds; the
// server listens on 127.0.0.1 only and is stopped before it exits.
//
//	go run ./runtime/serve/internal/binbench [-rounds 3] [-window 2s] [-frames 33] [-threads 1]
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/worldfoundry/wfgen/gen/validate"
	"github.com/worldfoundry/wfgen/runtime/remote"
	"github.com/worldfoundry/wfgen/runtime/serve/internal/imagemodel"

	"github.com/worldfoundry/wfgen/runtime/serve/internal/benchproc"
	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

func main() {
	rounds := flag.Int("rounds", 3, "interleaved rounds")
	window := flag.Duration("window", 2*time.Second, "length of one measurement window")
	frames := flag.Int("frames", 33, "frames of the generated clip (4k+1, at most 33)")
	threads := flag.Int("threads", 1, "intra-op threads of libtorch")
	flag.Parse()
	if err := run(*rounds, *window, *frames, *threads); err != nil {
		fmt.Fprintln(os.Stderr, "binbench:", err)
		os.Exit(1)
	}
}

// bench is one case: a task with its call, run through a remote client.
type bench struct {
	name  string
	about string
	spec  *spec.ModelInferenceSpec
	task  string
	call  map[string]any
}

// mode is one way of sending tensors.
type mode struct {
	name string
	opts []remote.Option
}

var modes = []mode{{"JSON", []remote.Option{remote.WithJSONTensors()}}, {"binary", nil}}

func run(rounds int, window time.Duration, frames, threads int) error {
	w, err := benchproc.NewWorkspace("binbench")
	if err != nil {
		return err
	}
	defer w.Close()
	root, dir := w.Root, w.Dir
	if err := imagemodel.Build(dir); err != nil {
		return err
	}
	world := filepath.Join(root, "manifests", "tiny-world.yaml")
	specs := map[string]*spec.ModelInferenceSpec{}
	for _, m := range []string{imagemodel.Manifest(), world} {
		f, diags, err := validate.File(m)
		if err != nil || len(diags) > 0 {
			return fmt.Errorf("%s: %v %v", m, err, diags)
		}
		specs[f.Spec.ModelFamilyID] = f.Spec
	}
	srv, stop, err := w.Serve(threads, imagemodel.Manifest(), world)
	if err != nil {
		return err
	}
	defer stop()

	benches := []bench{
		{"image in", "image classifier: float32 [3,224,224] image in, float32 [10] logits out", specs["image-classifier"], "classify",
			map[string]any{"image": imagemodel.Image(1)}},
		{"video out", fmt.Sprintf("tiny world generate: a prompt in, uint8 [%d,128,128,3] clip out", frames), specs["tiny-world"], "generate",
			map[string]any{"prompt": "a lighthouse at dusk", "num_frames": int64(frames), "height": int64(128), "width": int64(128)}},
	}
	fmt.Printf("JSON vs binary tensors: wfserve on loopback, the remote client (runtime/remote); %d rounds × %v windows, intra-op threads %d, GOMAXPROCS %d, %d CPUs\n",
		rounds, window, threads, runtime.GOMAXPROCS(0), runtime.NumCPU())
	for _, b := range benches {
		if err := measure(srv.URL, b, rounds, window); err != nil {
			return fmt.Errorf("%s: %w", b.name, err)
		}
	}
	return nil
}

// result is what one window of one mode gave.
type result struct {
	lat            []time.Duration
	took           time.Duration
	sent, received int64
	failed         int
}

func measure(url string, b bench, rounds int, window time.Duration) error {
	// Both modes answer the same bytes.
	var first map[string]any
	for _, m := range modes {
		rc, err := remote.New(b.spec, url, m.opts...)
		if err != nil {
			return err
		}
		out, err := rc.Run(context.Background(), b.task, b.call, nil)
		if err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
		if first == nil {
			first = out
			continue
		}
		for k, v := range first {
			t, ok := v.(*tensor.Tensor)
			u, _ := out[k].(*tensor.Tensor)
			if ok && (u == nil || !bytes.Equal(t.Data, u.Data) || !slices.Equal(t.Shape, u.Shape)) {
				return fmt.Errorf("%s: output %q differs from the %s answer", m.name, k, modes[0].name)
			}
		}
	}
	levels := []int{1, 4}
	type key struct {
		mode string
		conc int
	}
	res := map[key]*result{}
	for _, m := range modes { // warm-up
		for _, c := range levels {
			if r := load(url, b, m, c, window/4); r.failed > 0 {
				return fmt.Errorf("%s: %d failed requests while warming up", m.name, r.failed)
			}
		}
	}
	for round := range rounds {
		for _, c := range levels {
			order := slices.Clone(modes)
			if round%2 == 1 {
				slices.Reverse(order)
			}
			for _, m := range order {
				r := load(url, b, m, c, window)
				k := key{m.name, c}
				if res[k] == nil {
					res[k] = &result{}
				}
				acc := res[k]
				acc.lat = append(acc.lat, r.lat...)
				acc.took += r.took
				acc.sent += r.sent
				acc.received += r.received
				acc.failed += r.failed
			}
		}
	}
	fmt.Printf("\n%s\n", b.about)
	fmt.Printf("%-8s %8s %10s %10s %14s %14s %8s\n", "tensors", "clients", "req/s", "p50", "bytes sent/req", "bytes recv/req", "errors")
	for _, c := range levels {
		for _, m := range modes {
			r := res[key{m.name, c}]
			n := int64(len(r.lat))
			slices.Sort(r.lat)
			perReq := func(v int64) int64 {
				if n == 0 {
					return 0
				}
				return v / n
			}
			fmt.Printf("%-8s %8d %10.1f %10s %14d %14d %8d\n", m.name, c, float64(n)/r.took.Seconds(), benchproc.Percentile(r.lat, 50, 10*time.Microsecond), perReq(r.sent), perReq(r.received), r.failed)
		}
		j, bn := res[key{"JSON", c}], res[key{"binary", c}]
		fmt.Printf("at %d client(s): binary ÷ JSON req/s %.2f×; bytes on the wire JSON ÷ binary %.2f×\n", c,
			(float64(len(bn.lat))/bn.took.Seconds())/(float64(len(j.lat))/j.took.Seconds()),
			float64(j.sent+j.received)/float64(len(j.lat))/(float64(bn.sent+bn.received)/float64(len(bn.lat))))
	}
	for k, r := range res {
		if r.failed > 0 {
			return fmt.Errorf("%s at %d clients: %d failed requests", k.mode, k.conc, r.failed)
		}
	}
	return nil
}

// counting counts the bytes of the connections it dials.
type counting struct {
	sent, received atomic.Int64
}

type countedConn struct {
	net.Conn
	c *counting
}

func (cc countedConn) Read(p []byte) (int, error) {
	n, err := cc.Conn.Read(p)
	cc.c.received.Add(int64(n))
	return n, err
}

func (cc countedConn) Write(p []byte) (int, error) {
	n, err := cc.Conn.Write(p)
	cc.c.sent.Add(int64(n))
	return n, err
}

// load runs conc remote clients of mode m for d.
func load(url string, b bench, m mode, conc int, d time.Duration) result {
	cnt := &counting{}
	var dialer net.Dialer
	tr := &http.Transport{MaxIdleConnsPerHost: conc, MaxConnsPerHost: conc, DisableCompression: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return countedConn{c, cnt}, nil
		}}
	defer tr.CloseIdleConnections()
	rc, err := remote.New(b.spec, url, append(slices.Clone(m.opts), remote.WithHTTPClient(&http.Client{Transport: tr, Timeout: 30 * time.Second}))...)
	if err != nil {
		return result{failed: 1}
	}
	var mu sync.Mutex
	var res result
	start := time.Now()
	end := start.Add(d)
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			bad := 0
			for time.Now().Before(end) {
				t0 := time.Now()
				if _, err := rc.Run(context.Background(), b.task, b.call, nil); err != nil {
					bad++
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			res.lat = append(res.lat, mine...)
			res.failed += bad
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.took = time.Since(start)
	res.sent, res.received = cnt.sent.Load(), cnt.received.Load()
	return res
}

// pct returns the nearest-rank percentile of sorted latencies.
