package serve_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/worldfoundry/wfgen/generated/tinyworld"
	"github.com/worldfoundry/wfgen/runtime/remote"
	"github.com/worldfoundry/wfgen/runtime/serve"
	"github.com/worldfoundry/wfgen/runtime/stream"
)

// cutter is a TCP forwarder in front of a server that a test switches
// (another replica) and cuts: armed, it drops the client's next bytes and
// closes every connection it forwards, as a replica's death does.
type cutter struct {
	ln       net.Listener
	mu       sync.Mutex
	target   string
	conns    []net.Conn
	armed    bool
	accepted int
}

func newCutter(t *testing.T, target string) *cutter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &cutter{ln: ln, target: target}
	t.Cleanup(func() { ln.Close(); c.cut() })
	go c.serve()
	return c
}

func (c *cutter) addr() string { return c.ln.Addr().String() }

func (c *cutter) serve() {
	for {
		in, err := c.ln.Accept()
		if err != nil {
			return
		}
		c.mu.Lock()
		target := c.target
		c.accepted++
		c.mu.Unlock()
		out, err := net.Dial("tcp", target)
		if err != nil {
			in.Close()
			continue
		}
		c.mu.Lock()
		c.conns = append(c.conns, in, out)
		c.mu.Unlock()
		go func() { io.Copy(in, out); in.Close() }()
		go func() {
			buf := make([]byte, 64<<10)
			for {
				n, err := in.Read(buf)
				if n > 0 {
					c.mu.Lock()
					armed := c.armed
					c.mu.Unlock()
					if armed {
						c.cut()
						return
					}
					if _, err := out.Write(buf[:n]); err != nil {
						return
					}
				}
				if err != nil {
					out.Close()
					return
				}
			}
		}()
	}
}

// arm makes the client's next bytes cut every connection, and switches
// the connections made after it to target.
func (c *cutter) arm(target string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armed, c.target = true, target
}

// switchTo sends the connections made after it to target.
func (c *cutter) switchTo(target string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.target = target
}

// cut closes every forwarded connection.
func (c *cutter) cut() {
	c.mu.Lock()
	conns := c.conns
	c.conns, c.armed = nil, false
	c.mu.Unlock()
	for _, k := range conns {
		k.Close()
	}
}

// TestResumeAfterBreak plays the tiny world through a forwarder that is
// cut at seeded random points — the client's first bytes after chunk k:
// the controls it sets before chunk k+1 or the ack that asks for it, so
// the break comes in the middle of a chunk, and the forwarder then
// reaches the other of two servers with the same session key. With
// remote.WithResume the session goes on on each of the client's session
// transports, with a snapshot after every chunk and after every third
// (chunks made again, with the controls set in between): no error, and
// every chunk equals an uninterrupted in-process session's bit for bit,
// none twice, none missing. Without a session key the snapshots are
// refused and the session resumes from its start, the same chunks;
// without WithResume the break ends the session; a reopen on a server
// of another key is refused, and the session ends with the break's
// error, not the refusal.
func TestResumeAfterBreak(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := withGRPC(t, start(t, serve.Config{SessionKey: sessionKey}))
	b := withGRPC(t, start(t, serve.Config{SessionKey: sessionKey}))
	other := withGRPC(t, start(t, serve.Config{SessionKey: []byte("another replica set's key, 32 B.")}))
	na := withGRPC(t, start(t, serve.Config{}))
	nb := withGRPC(t, start(t, serve.Config{}))
	const chunks = 24
	script := func(i int) stream.Controls {
		names := []string{"forward", "backward", "left", "right"}
		if i%2 == 0 || i%5 == 0 {
			return stream.Controls{names[i%4]: 1, names[(i/3)%4]: float64(i%3) / 2}
		}
		return nil
	}
	params := tinyworld.StepParams{Speed: 3}
	ref, err := tinyworld.NewClient(inProcess(t, "tiny-world")).StepStream(ctx, params, stream.WithPacing(false))
	if err != nil {
		t.Fatal(err)
	}
	want := playChunks(t, ref, 0, chunks, script)
	rest := func(s *grpcStarted) string { return strings.TrimPrefix(s.url, "http://") }
	grpcAddr := func(s *grpcStarted) string { return s.addr }
	rng := rand.New(rand.NewPCG(45, 1))

	// play plays a session through the cutter, cut after the chunks in
	// cuts, each time towards the other server, and returns the chunks and
	// the error that ended it; with options (WithResume) it fails t
	// unless every cut was made and followed by a new connection.
	play := func(t *testing.T, scheme string, addrOf func(*grpcStarted) string, servers [2]*grpcStarted, cuts []int, opts ...remote.Option) (map[int][]byte, error) {
		cu := newCutter(t, addrOf(servers[0]))
		defer func() {
			cu.mu.Lock()
			defer cu.mu.Unlock()
			if len(opts) > 0 && cu.accepted < len(cuts)+1 {
				t.Errorf("%d connections for %d cuts", cu.accepted, len(cuts))
			}
		}()
		rc, err := remote.New(tinyworld.Spec(), scheme+cu.addr(), opts...)
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
		got := map[int][]byte{}
		for i := range chunks {
			if c := script(i); c != nil {
				if err := s.SetControls(c); err != nil {
					return got, fmt.Errorf("controls before chunk %d: %w", i, err)
				}
			}
			var chunkErr error
			for c, err := range s.Chunks(ctx) {
				if err != nil {
					chunkErr = err
					break
				}
				if c.Index != i || got[c.Index] != nil {
					return got, fmt.Errorf("chunk %d where %d was due", c.Index, i)
				}
				got[c.Index] = bytes.Clone(c.Video.Frames.Data)
				break
			}
			if chunkErr != nil {
				return got, chunkErr
			}
			if n := slices.Index(cuts, i); n >= 0 {
				cu.arm(addrOf(servers[(n+1)%2]))
			}
		}
		return got, nil
	}
	cutsOf := func(n int) []int {
		var cuts []int
		for len(cuts) < n {
			if k := rng.IntN(chunks - 2); !slices.Contains(cuts, k) {
				cuts = append(cuts, k)
			}
		}
		slices.Sort(cuts)
		return cuts
	}
	// A server that shuts down (SIGTERM) ends its sessions with an error
	// (a WebSocket's close code 1001, going away): a session resumes on
	// the other replica, as the balancer sends new connections there.
	t.Run("websocket/drain", func(t *testing.T) {
		d := withGRPC(t, start(t, serve.Config{SessionKey: sessionKey}))
		cu := newCutter(t, rest(d))
		rc, err := remote.New(tinyworld.Spec(), "http://"+cu.addr(), remote.WithResume(1))
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		s, err := tinyworld.NewClient(rc).StepStream(ctx, params, stream.WithPacing(false))
		if err != nil {
			t.Fatal(err)
		}
		got := playChunks(t, s, 0, 5, script)
		cu.switchTo(rest(b))
		drained := make(chan error, 1)
		go func() { drained <- d.srv.Shutdown(ctx) }()
		if err := <-drained; err != nil {
			t.Fatal(err)
		}
		for i, c := range playChunks(t, s, 5, chunks-5, script) {
			got[i] = c
		}
		sameChunks(t, "after a drain", want, got, 0, chunks)
	})
	for _, tr := range []struct {
		name, scheme string
		addr         func(*grpcStarted) string
	}{{"websocket", "http://", rest}, {"grpc", "grpc://", grpcAddr}} {
		for _, every := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s/every%d", tr.name, every), func(t *testing.T) {
				cuts := cutsOf(4)
				got, err := play(t, tr.scheme, tr.addr, [2]*grpcStarted{a, b}, cuts, remote.WithResume(every))
				if err != nil {
					t.Fatalf("cut after chunks %v: %v", cuts, err)
				}
				sameChunks(t, fmt.Sprintf("cut after chunks %v", cuts), want, got, 0, chunks)
			})
		}
		t.Run(tr.name+"/nokey", func(t *testing.T) {
			cuts := cutsOf(2)
			got, err := play(t, tr.scheme, tr.addr, [2]*grpcStarted{na, nb}, cuts, remote.WithResume(1))
			if err != nil {
				t.Fatalf("cut after chunks %v: %v", cuts, err)
			}
			sameChunks(t, fmt.Sprintf("without a key, cut after chunks %v", cuts), want, got, 0, chunks)
		})
		t.Run(tr.name+"/noresume", func(t *testing.T) {
			if _, err := play(t, tr.scheme, tr.addr, [2]*grpcStarted{a, b}, []int{3}); err == nil {
				t.Fatal("a session without WithResume went on after the break")
			}
		})
		t.Run(tr.name+"/refused", func(t *testing.T) {
			_, err := play(t, tr.scheme, tr.addr, [2]*grpcStarted{a, other}, []int{3}, remote.WithResume(1))
			var se *remote.StatusError
			if err == nil || errors.As(err, &se) && se.Status == 400 {
				t.Fatalf("a reopen on a server of another key: %v, want the break's error", err)
			}
			t.Logf("a reopen refused: %v", err)
		})
	}
}
