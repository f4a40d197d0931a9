package serve_test

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/worldfoundry/wfgen/runtime/remote"
	"github.com/worldfoundry/wfgen/runtime/serve"
)

// BenchmarkTransports measures one infer call of the tiny encoder (16
// tokens) through the remote client over loopback, by transport — REST
// with JSON tensors, REST with binary tensors (the client's default), gRPC
// — at 1, 8 and 32 concurrent clients, against one server (metrics on, the
// access log formatted and discarded, no batching). Besides ns/op (the
// inverse of the throughput) it reports req/s and the calls' p50 and p99
// latency in µs.
func BenchmarkTransports(b *testing.B) {
	srv := start(b, serve.Config{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), MaxQueue: 1024})
	g := withGRPC(b, srv)
	sp := loadSpec(b, "tiny-encoder")
	for _, tr := range []struct {
		name string
		url  string
		opts []remote.Option
	}{
		{"rest-json", srv.url, []remote.Option{remote.WithJSONTensors()}},
		{"rest-binary", srv.url, nil},
		{"grpc", "grpc://" + g.addr, nil},
	} {
		rc, err := remote.New(sp, tr.url, tr.opts...)
		if err != nil {
			b.Fatal(err)
		}
		for _, clients := range []int{1, 8, 32} {
			b.Run(tr.name+"/clients-"+strconv.Itoa(clients), func(b *testing.B) {
				ctx := context.Background()
				call := map[string]any{"tokens": tokens(1, 16)}
				var mu sync.Mutex
				var lat []time.Duration
				var next atomic.Int64
				start := time.Now()
				var wg sync.WaitGroup
				for range clients {
					wg.Add(1)
					go func() {
						defer wg.Done()
						var mine []time.Duration
						for next.Add(1) <= int64(b.N) {
							t0 := time.Now()
							if _, err := rc.Run(ctx, "embed", call, nil); err != nil {
								b.Error(err)
								return
							}
							mine = append(mine, time.Since(t0))
						}
						mu.Lock()
						lat = append(lat, mine...)
						mu.Unlock()
					}()
				}
				wg.Wait()
				elapsed := time.Since(start)
				if len(lat) == 0 {
					return
				}
				slices.Sort(lat)
				b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "req/s")
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			})
		}
		rc.Close()
	}
}
