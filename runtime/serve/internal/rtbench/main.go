// Command rtbench is the realtime latency benchmark of `make bench` across
// processes: it starts wfserve (built from ./cmd/wfserve) on loopback
// serving the demo's tiny world, with its gRPC API, and runs sessions of
// the world's step task — 20 unpaced chunks, in lockstep, as
// remote.Client.Stream runs them — in turn in this process (the
// in-process client, as the demo does), over a WebSocket and over a gRPC
// stream to the server. The WebSocket client keeps its connection from
// one session to the next, as remote.Client does; "WS, new conn" dials a
// new one for every session. Rounds alternate the four in a new order each
// round; it prints, per round, the median over its sessions of the first
// chunk's latency (what a viewer waits from the first Chunks call) and of
// the steady chunks' p50, then each transport's minus in-process (the
// goal of issue 34: within 1 ms).
//
// It is bounded: -rounds rounds of -sessions sessions each; the server
// listens on 127.0.0.1 only and is stopped before it exits.
//
//	go run ./runtime/serve/internal/rtbench [-rounds 3] [-sessions 100] [-threads 1]
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"time"

	"github.com/worldfoundry/wfgen/gen/validate"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/remote"
	"github.com/worldfoundry/wfgen/runtime/serve/internal/benchproc"
	"github.com/worldfoundry/wfgen/runtime/stream"
	_ "github.com/worldfoundry/wfgen/runtime/torch" // the engine of the in-process client
)

func main() {
	rounds := flag.Int("rounds", 3, "rounds")
	sessions := flag.Int("sessions", 100, "sessions per transport and round")
	threads := flag.Int("threads", 1, "intra-op threads of libtorch, here and in the server")
	flag.Parse()
	if err := run(*rounds, *sessions, *threads); err != nil {
		fmt.Fprintln(os.Stderr, "rtbench:", err)
		os.Exit(1)
	}
}

// streamer starts a realtime session: the in-process and the remote client.
type streamer interface {
	Stream(ctx context.Context, taskID string, call map[string]any, opts ...stream.Option) (*stream.Session, error)
}

func run(rounds, sessions, threads int) error {
	if rounds < 1 || sessions < 1 {
		return fmt.Errorf("-rounds %d, -sessions %d: want at least 1 of each", rounds, sessions)
	}
	w, err := benchproc.NewWorkspace("rtbench")
	if err != nil {
		return err
	}
	defer w.Close()
	root, dir := w.Root, w.Dir
	manifest := filepath.Join(root, "manifests", "tiny-world.yaml")
	f, diags, err := validate.File(manifest)
	if err != nil || len(diags) > 0 {
		return fmt.Errorf("%s: %v %v", manifest, err, diags)
	}
	srv, stop, err := w.Serve(threads, "-grpc-addr", "127.0.0.1:0", manifest)
	if err != nil {
		return err
	}
	defer stop()
	// This process's engine gets the server's threads, before its first use.
	os.Setenv("WORLDFOUNDRY_TORCH_THREADS", strconv.Itoa(threads))
	os.Setenv("WORLDFOUNDRY_TORCH_INTEROP_THREADS", "1")
	local, err := client.New(f.Spec, client.WithCheckpointRoot(dir), client.WithDevice("cpu"))
	if err != nil {
		return err
	}
	defer local.Close()
	ws, err := remote.New(f.Spec, srv.URL)
	if err != nil {
		return err
	}
	defer ws.Close()
	gs, err := remote.New(f.Spec, "grpc://"+srv.GRPCAddr)
	if err != nil {
		return err
	}
	defer gs.Close()
	fresh := &newConnection{open: func() (*remote.Client, error) { return remote.New(f.Spec, srv.URL) }}
	defer fresh.close()
	names := []string{"in-process", "WebSocket", "WS, new conn", "gRPC stream"}
	clients := []streamer{local, ws, fresh, gs}

	ctx := context.Background()
	// One session of each first: loads, warms up, opens the gRPC connection.
	for _, c := range clients {
		if _, _, err := session(ctx, c); err != nil {
			return err
		}
	}
	fmt.Printf("realtime latency across processes: wfserve on loopback, tiny world, sessions of 20 unpaced chunks in lockstep; %d rounds × %d sessions, intra-op threads %d, GOMAXPROCS %d, %d CPUs\n",
		rounds, sessions, threads, runtime.GOMAXPROCS(0), runtime.NumCPU())
	fmt.Printf("%-6s %-12s %12s %12s %14s %14s\n", "round", "transport", "first chunk", "steady p50", "first − local", "steady − local")
	for r := range rounds {
		first := make([]time.Duration, len(clients))
		steady := make([]time.Duration, len(clients))
		for _, i := range rand.Perm(len(clients)) {
			var fs, ss []time.Duration
			for range sessions {
				f, s, err := session(ctx, clients[i])
				if err != nil {
					return fmt.Errorf("%s: %w", names[i], err)
				}
				fs, ss = append(fs, f), append(ss, s)
			}
			first[i], steady[i] = median(fs), median(ss)
		}
		for i, name := range names {
			diff := func(d, base time.Duration) string {
				if i == 0 {
					return "—"
				}
				return round(d - base)
			}
			fmt.Printf("%-6d %-12s %12s %12s %14s %14s\n", r+1, name, round(first[i]), round(steady[i]), diff(first[i], first[0]), diff(steady[i], steady[0]))
		}
	}
	return nil
}

// newConnection runs each session on a WebSocket of its own: a new remote
// client each time, the one before closed (with the connection it kept).
type newConnection struct {
	open func() (*remote.Client, error)
	last *remote.Client
}

func (n *newConnection) Stream(ctx context.Context, taskID string, call map[string]any, opts ...stream.Option) (*stream.Session, error) {
	n.close()
	c, err := n.open()
	if err != nil {
		return nil, err
	}
	n.last = c
	return c.Stream(ctx, taskID, call, opts...)
}

func (n *newConnection) close() {
	if n.last != nil {
		n.last.Close()
		n.last = nil
	}
}

// session runs one session of 20 unpaced chunks and returns its first
// chunk's latency and its steady chunks' p50.
func session(ctx context.Context, c streamer) (first, steady time.Duration, err error) {
	sess, err := c.Stream(ctx, "step", map[string]any{"speed": 3.0}, stream.WithPacing(false), stream.WithMaxChunks(20))
	if err != nil {
		return 0, 0, err
	}
	for _, err := range sess.Chunks(ctx) {
		if err != nil {
			return 0, 0, err
		}
	}
	st := sess.Stats()
	return st.FirstChunk, st.Steady.P50, nil
}

// median is the middle of ds (the upper one of an even count).
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// round prints a duration to the microsecond.
func round(d time.Duration) string { return d.Round(time.Microsecond).String() }
