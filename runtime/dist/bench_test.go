package dist_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/worldfoundry/wfgen/runtime/dist"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// BenchmarkCollectives measures the collectives between ranks in one
// process (goroutines, Gloo over loopback): rank 0's time per call.
func BenchmarkCollectives(b *testing.B) {
	if _, err := engine.DefaultEngine(); err != nil {
		b.Skip(err)
	}
	for _, size := range []int{1, 2} {
		for _, nbytes := range []int{4 << 10, 4 << 20} {
			for _, op := range []string{"gather", "all_gather", "all_reduce"} {
				b.Run(fmt.Sprintf("%s/world=%d/bytes=%d", op, size, nbytes), func(b *testing.B) {
					errs := worldB(b, size, time.Minute, func(g *dist.Group) error {
						x := tensor.Zeros(tensor.Uint8, int64(nbytes))
						f := tensor.Zeros(tensor.Float32, int64(nbytes/4))
						ctx := context.Background()
						if g.Rank() == 0 {
							b.SetBytes(int64(nbytes))
							b.ResetTimer()
						}
						for range b.N {
							var err error
							switch op {
							case "gather":
								_, err = g.Gather(ctx, x, 0)
							case "all_gather":
								_, err = g.AllGather(ctx, x)
							case "all_reduce":
								err = g.AllReduce(ctx, f, dist.Sum)
							}
							if err != nil {
								return err
							}
						}
						if g.Rank() == 0 {
							b.StopTimer()
						}
						return nil
					})
					for _, err := range errs {
						if err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}
