package serve_test

import (
	"context"
	"testing"
	"time"

	"github.com/worldfoundry/wfgen/runtime/remote"
	"github.com/worldfoundry/wfgen/runtime/serve"
	"github.com/worldfoundry/wfgen/runtime/stream"
)

// BenchmarkRealtimeLatency runs tiny-world sessions of 20 unpaced chunks
// in this process and through a server on loopback (a WebSocket session
// and a gRPC ModelStreamInfer stream, each in lockstep, as
// remote.Client.Stream runs them; "websocket" on the connection its client
// keeps, "websocket-new" on a new one each time), and reports what a
// viewer waits: the first chunk and the steady chunks' median, in µs,
// over every session of the run. The gap between the two is the
// transport's cost per chunk (docs/benchmarks/README.md).
func BenchmarkRealtimeLatency(b *testing.B) {
	ctx := context.Background()
	s := start(b, serve.Config{})
	type streamer interface {
		Stream(ctx context.Context, taskID string, call map[string]any, opts ...stream.Option) (*stream.Session, error)
	}
	for _, c := range []struct {
		name string
		c    streamer
	}{
		{"inprocess", inProcess(b, "tiny-world")},
		{"websocket", remoteClient(b, s, "tiny-world")},
		{"websocket-new", &newClientEach{open: func() *remote.Client { return remoteClient(b, s, "tiny-world") }}},
		{"grpc", grpcRemote(b, withGRPC(b, s), "tiny-world")},
	} {
		b.Run(c.name, func(b *testing.B) {
			var first, steady []time.Duration
			for b.Loop() {
				sess, err := c.c.Stream(ctx, "step", map[string]any{"speed": 3.0}, stream.WithPacing(false), stream.WithMaxChunks(20))
				if err != nil {
					b.Fatal(err)
				}
				for _, err := range sess.Chunks(ctx) {
					if err != nil {
						b.Fatal(err)
					}
				}
				st := sess.Stats()
				first = append(first, st.FirstChunk)
				steady = append(steady, st.Steady.P50)
			}
			b.ReportMetric(float64(median(first).Microseconds()), "first-µs")
			b.ReportMetric(float64(median(steady).Microseconds()), "steady-p50-µs")
		})
	}
}

// newClientEach starts each session on a new remote client, and so on a
// new WebSocket; the client before is closed.
type newClientEach struct {
	open func() *remote.Client
	last *remote.Client
}

func (n *newClientEach) Stream(ctx context.Context, taskID string, call map[string]any, opts ...stream.Option) (*stream.Session, error) {
	if n.last != nil {
		n.last.Close()
	}
	n.last = n.open()
	return n.last.Stream(ctx, taskID, call, opts...)
}

// median is the middle of ds (the upper one of an even count).
func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s[len(s)/2]
}
