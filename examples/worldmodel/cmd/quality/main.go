// Command quality measures the learned world model (make demo trains it)
// against its simulator: the sprite and the ball within one pixel, by step
// index, over random episodes (docs/worldmodel.md, "How it is measured"). It
// measures the checkpoint of the current train.py: a root trained by another
// script (or torch) is trained again first (worldmodel.Ensure), so a changed
// script is never judged by its predecessor's weights. It exits 1 when the
// model misses its goals (worldmodel.Quality.Check).
//
//	go run ./examples/worldmodel/cmd/quality -root out/worldmodel -episodes 1000 -steps 32
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/worldfoundry/wfgen/examples/worldmodel"
	learned "github.com/worldfoundry/wfgen/generated/worldmodel"
	"github.com/worldfoundry/wfgen/runtime/client"
	_ "github.com/worldfoundry/wfgen/runtime/torch"
)

func main() {
	root := flag.String("root", "out/worldmodel", "the checkpoint root make demo trained into")
	episodes := flag.Int("episodes", 1000, "random episodes")
	steps := flag.Int("steps", 32, "steps per episode")
	seed := flag.Uint64("seed", 7, "the episodes' seed")
	buckets := flag.Int("buckets", 4, "step-index buckets to report")
	flag.Parse()
	ctx := context.Background()
	rep, err := worldmodel.Ensure(ctx, *root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "quality:", err)
		os.Exit(1)
	}
	if rep != nil {
		fmt.Printf("trained in %.1fs: loss %g, one-step pixel accuracy %.5f, frames %.4f\n", rep.Seconds, rep.Loss, rep.PixelAccuracy, rep.FrameAccuracy)
	}
	w, err := learned.New(client.WithCheckpointRoot(*root), client.WithDevice("cpu"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "quality:", err)
		os.Exit(1)
	}
	defer w.Close()
	q, _, err := worldmodel.Evaluate(ctx, w, worldmodel.RandomEpisodes(*seed, *episodes, *steps))
	if err != nil {
		fmt.Fprintln(os.Stderr, "quality:", err)
		os.Exit(1)
	}
	fmt.Println(q)
	per := max(1, *steps / *buckets)
	for lo := 0; lo < *steps; lo += per {
		hi := min(lo+per, *steps)
		sum, low := 0.0, 1.0
		for _, v := range q.BallByStep[lo:hi] {
			sum += v
			low = min(low, v)
		}
		fmt.Printf("ball within 1 px, steps %d–%d: %.4f (lowest step %.4f)\n", lo+1, hi, sum/float64(hi-lo), low)
	}
	if err := q.Check(); err != nil {
		fmt.Fprintln(os.Stderr, "quality:", err)
		os.Exit(1)
	}
}
