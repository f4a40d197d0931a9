package main

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/worldfoundry/wfgen/generated/tinyworld"
	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/remote"
	"github.com/worldfoundry/wfgen/runtime/stream"
)

// sessionsOpen reads a replica's wfserve_sessions_open gauge (-1 when it
// does not answer).
func sessionsOpen(p *wfserveProc) int {
	resp, err := http.Get(p.url + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "wfserve_sessions_open "); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return -1
			}
			return int(n)
		}
	}
	return -1
}

// failoverConfig is haproxyConfig with a connect timeout of 100 ms: a
// connection that a killed replica refuses before the health check
// marked it down is sent to the other replica after haproxy's turn-around
// time, min(timeout connect, 1 s) — 1 s with haproxyConfig's 2 s, the
// stall of such a resume.
var failoverConfig = strings.Replace(haproxyConfig, "timeout connect 2s", "timeout connect 100ms", 1)

// TestSessionSurvivesReplicaKill runs two wfserve replicas with the same
// -session-key-file behind Debian's haproxy (round robin, no affinity)
// (failoverConfig) and plays a tiny-world session through it with remote.WithResume, over
// the WebSocket (a snapshot after every chunk) and over gRPC (after every
// third): after seeded random chunks the replica that holds the session
// is killed (SIGKILL) and a new one takes its place in the balancer. The
// session goes on with no error, and every chunk — before and after each
// kill — equals an uninterrupted in-process session's with the same
// controls, bit for bit. The time of the chunk after each kill (the
// stall: reconnect, restore, the chunks made again; 20 kills in all) is
// logged beside the median of the others.
func TestSessionSurvivesReplicaKill(t *testing.T) {
	haproxyPath(t)
	t.Parallel()
	ctx := context.Background()
	keyFile := filepath.Join(t.TempDir(), "session.key")
	if err := os.WriteFile(keyFile, []byte("the failover test's replicas' key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	replica := func() *wfserveProc {
		return startProc(t, "-grpc-addr", "127.0.0.1:0", "-session-key-file", keyFile)
	}
	slots := map[string]*wfserveProc{"r1": replica(), "r2": replica()}
	bal := startHAProxy(t, failoverConfig, slots["r1"], slots["r2"])
	replicasSeen(t, bal.url, "r1", "r2")

	const chunks = 64
	rng := rand.New(rand.NewPCG(45, 3))
	names := []string{"forward", "backward", "left", "right"}
	script := map[int]stream.Controls{0: {"right": 1}}
	for i := 1; i < chunks; i++ {
		if rng.IntN(4) == 0 {
			script[i] = stream.Controls{names[rng.IntN(4)]: 1, names[rng.IntN(4)]: float64(rng.IntN(3)) / 2}
		}
	}
	params := tinyworld.StepParams{Speed: 3}
	// play takes the chunks of s, setting the script's controls before
	// each; after the chunks in kill, it kills the replica holding the
	// session (then asks for the next chunk, timed) and brings a new one
	// in its place.
	play := func(t *testing.T, s *stream.Session, kill []int) (frames [][]byte, stalls, steady []time.Duration) {
		killed := false
		for i := range chunks {
			if c := script[i]; c != nil {
				if err := s.SetControls(c); err != nil {
					t.Fatalf("controls before chunk %d: %v", i, err)
				}
			}
			start := time.Now()
			got := false
			for c, err := range s.Chunks(ctx) {
				if err != nil {
					t.Fatalf("chunk %d: %v", i, err)
				}
				if c.Index != i {
					t.Fatalf("chunk %d, want %d", c.Index, i)
				}
				frames = append(frames, bytes.Clone(c.Video.Frames.Data))
				got = true
				break
			}
			if !got {
				t.Fatalf("the session ended before chunk %d", i)
			}
			if d := time.Since(start); killed {
				stalls = append(stalls, d)
			} else if i > 0 {
				steady = append(steady, d)
			}
			if killed {
				// Bring a new replica in place of the killed one.
				for name, p := range slots {
					select {
					case <-p.exited:
						slots[name] = replica()
						bal.setReplica(t, name, slots[name])
					default:
					}
				}
				replicasSeen(t, bal.url, "r1", "r2")
			}
			killed = slices.Contains(kill, i)
			if killed {
				var holder string
				enginetest.WaitFor(t, "one replica to hold the session", func() bool {
					holder = ""
					n := 0
					for name, p := range slots {
						if k := sessionsOpen(p); k > 0 {
							holder, n = name, n+k
						}
					}
					return n == 1
				})
				slots[holder].cmd.Process.Kill()
				<-slots[holder].exited
			}
		}
		return frames, stalls, steady
	}

	in, err := tinyworld.New(client.WithCheckpointRoot(tiny.Dir(t)), client.WithDevice("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	ref, err := in.StepStream(ctx, params, stream.WithPacing(false))
	if err != nil {
		t.Fatal(err)
	}
	want, _, _ := play(t, ref, nil)

	for _, tc := range []struct {
		name, url    string
		every, kills int
	}{
		{"websocket", bal.url, 1, 10},
		{"grpc", "grpc://" + bal.grpcAddr, 3, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var kill []int
			for len(kill) < tc.kills {
				if k := 1 + rng.IntN(chunks-3); !slices.Contains(kill, k) && !slices.Contains(kill, k-1) && !slices.Contains(kill, k+1) {
					kill = append(kill, k)
				}
			}
			slices.Sort(kill)
			rc, err := remote.New(tinyworld.Spec(), tc.url, remote.WithResume(tc.every))
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			sctx, cancel := context.WithCancel(ctx)
			defer cancel()
			s, err := tinyworld.NewClient(rc).StepStream(sctx, params, stream.WithPacing(false))
			if err != nil {
				t.Fatal(err)
			}
			got, stalls, steady := play(t, s, kill)
			for i := range want {
				if !bytes.Equal(got[i], want[i]) {
					t.Errorf("chunk %d differs from the in-process session's (kills after chunks %v)", i, kill)
				}
			}
			slices.Sort(steady)
			sorted := slices.Sorted(slices.Values(stalls))
			t.Logf("%s, a snapshot every %d chunks: killed after chunks %v; the chunk after each kill took %v (median %v, max %v; other chunks: median %v)",
				tc.name, tc.every, kill, stalls, sorted[len(sorted)/2], sorted[len(sorted)-1], steady[len(steady)/2])
			cancel()
		})
	}
}
