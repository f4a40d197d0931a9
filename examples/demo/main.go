// Command demo is wfgen's end-to-end demo, run by `make demo`: it builds the
// bundled tiny TorchScript checkpoints from source, then, through the typed
// clients wfgen generated from manifests/, embeds a few hundred token
// sequences in batches, reads the held-out handwritten digits with a small
// CNN trained on real data (trained with Debian's python3-torch on first run,
// cached under out/digits) and prints its accuracy, plays the tiny world
// model as a realtime stream, and plays a world model learned from a
// simulator (trained on first run, cached under out/worldmodel) against that
// simulator, printing how close it stays; it writes PNGs and GIFs to out/.
package main

import (
	"context"
	"flag"
	"fmt"
	"image"
	"log"
	"os"
	"path/filepath"
	"slices"
	"time"

	trainer "github.com/worldfoundry/wfgen/examples/digits"
	"github.com/worldfoundry/wfgen/examples/tinymodels"
	"github.com/worldfoundry/wfgen/examples/worldmodel"
	"github.com/worldfoundry/wfgen/generated/digits"
	"github.com/worldfoundry/wfgen/generated/tinyencoder"
	"github.com/worldfoundry/wfgen/generated/tinyworld"
	learned "github.com/worldfoundry/wfgen/generated/worldmodel"
	"github.com/worldfoundry/wfgen/runtime/artifactio"
	"github.com/worldfoundry/wfgen/runtime/batch"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/stream"
	_ "github.com/worldfoundry/wfgen/runtime/torch" // the libtorch engine

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

func main() {
	out := flag.String("out", "out", "folder for checkpoints and outputs")
	items := flag.Int("items", 400, "token sequences to embed")
	chunks := flag.Int("chunks", 12, "realtime chunks to stream")
	flag.Parse()
	log.SetFlags(0)
	if err := run(context.Background(), *out, *items, *chunks); err != nil {
		log.Fatalf("demo: %v", err)
	}
}

func run(ctx context.Context, out string, items, chunks int) error {
	root := filepath.Join(out, "model-root")
	start := time.Now()
	if err := tinymodels.Build(root); err != nil {
		return err
	}
	fmt.Printf("built tiny checkpoints under %s in %v\n", root, time.Since(start).Round(time.Millisecond))

	if err := embed(ctx, root, items); err != nil {
		return err
	}
	if err := classify(ctx, out); err != nil {
		return err
	}
	if err := world(ctx, root, out, chunks); err != nil {
		return err
	}
	return learnedWorld(ctx, out)
}

// minAccuracy is the held-out accuracy below which the demo fails.
const minAccuracy = 0.95

// classify reads the held-out handwritten digits with the digits model:
// PNGs decoded in Go, converted to the tensor the manifest declares, run
// through the generated client in batches.
func classify(ctx context.Context, out string) error {
	root := filepath.Join(out, "digits")
	start := time.Now()
	rep, err := trainer.Ensure(ctx, root)
	if err != nil {
		return err
	}
	if rep != nil {
		fmt.Printf("digits: trained on %d pictures in %.1fs (python3-torch; %v with start-up), Python's held-out accuracy %.4f (%d/%d)\n",
			rep.Train, rep.Seconds, time.Since(start).Round(100*time.Millisecond), rep.Accuracy, rep.Correct, rep.Test)
	} else {
		fmt.Printf("digits: using the trained checkpoint cached in %s\n", root)
	}
	items, err := trainer.TestSet(root)
	if err != nil {
		return err
	}
	pics := make([]image.Image, len(items))
	ps := make([]digits.ClassifyParams, len(items))
	for i, it := range items {
		if pics[i], err = it.Load(); err != nil {
			return err
		}
		ps[i] = digits.DefaultClassifyParams()
		if err := ps[i].SetPixelsFromImage(pics[i]); err != nil {
			return fmt.Errorf("%s: %w", it.Path, err)
		}
	}
	c, err := digits.New(client.WithCheckpointRoot(root), client.WithDevice("cpu"))
	if err != nil {
		return err
	}
	defer c.Close()
	start = time.Now()
	res, err := c.ClassifyBatch(ctx, ps)
	if err != nil {
		return err
	}
	el := time.Since(start)
	predicted, truth := make([]int, len(items)), make([]int, len(items))
	correct := 0
	for i, r := range res {
		l, err := r.Label.Int64s()
		if err != nil || len(l) != 1 {
			return fmt.Errorf("item %d: label %v: %v", i, r.Label.Shape, err)
		}
		predicted[i], truth[i] = int(l[0]), items[i].Label
		if predicted[i] == truth[i] {
			correct++
		}
	}
	acc := float64(correct) / float64(len(items))
	fmt.Printf("digits: accuracy %.4f (%d/%d held-out pictures, batched through digits.ClassifyBatch in %v)\n", acc, correct, len(items), el.Round(time.Millisecond))
	// The sheet shows 32 pictures in test-set order: every misread one (up
	// to 8) and the first of the others.
	var show []int
	wrong := 0
	for i := range items {
		if predicted[i] != truth[i] && wrong < 8 {
			wrong++
			show = append(show, i)
		}
	}
	for i := 0; i < len(items) && len(show) < 32; i++ {
		if predicted[i] == truth[i] {
			show = append(show, i)
		}
	}
	slices.Sort(show)
	var sp []image.Image
	var spred, struth []int
	for _, i := range show {
		sp, spred, struth = append(sp, pics[i]), append(spred, predicted[i]), append(struth, truth[i])
	}
	sheet, err := trainer.Sheet(sp, spred, struth)
	if err != nil {
		return err
	}
	sheetPath := filepath.Join(out, "digits.png")
	if err := artifactio.WritePNG(sheetPath, sheet); err != nil {
		return err
	}
	fmt.Printf("digits: %s shows %d pictures with the digit read (green right, red wrong: %d)\n", sheetPath, len(show), wrong)
	if acc < minAccuracy {
		return fmt.Errorf("digits: accuracy %.4f is below %.2f", acc, minAccuracy)
	}
	return nil
}

// embed runs the tiny encoder over many sequences in batches.
func embed(ctx context.Context, root string, n int) error {
	enc, err := tinyencoder.New(client.WithCheckpointRoot(root), client.WithDevice("cpu"))
	if err != nil {
		return err
	}
	defer enc.Close()

	params := make([]tinyencoder.EmbedParams, n)
	for i := range params {
		p := tinyencoder.DefaultEmbedParams()
		ids := make([]int64, 16)
		for j := range ids {
			ids[j] = int64((i*31 + j*7) % tinymodels.EncoderVocab)
		}
		p.Tokens = tensor.FromInt64(ids, 16)
		params[i] = p
	}
	start := time.Now()
	next := 0 // the next tenth of the items to report
	progress := batch.WithStats(func(s batch.Stats) {
		if s.Done*10 >= next*n {
			fmt.Printf("embedding: %d/%d items, %d batches, %d padding items, %d out-of-memory retries\n", s.Done, n, s.Batches, s.Padded, s.Retries)
			next = s.Done*10/n + 1
		}
	})
	res, err := enc.EmbedBatch(ctx, params, progress)
	if err != nil {
		return err
	}
	el := time.Since(start)
	dim := res[0].Embedding.Vector.Shape[0]
	fmt.Printf("embedded %d items (dim %d) in %v: %.0f items/s\n", len(res), dim, el.Round(time.Millisecond), float64(len(res))/el.Seconds())
	return nil
}

// world renders a clip and plays a realtime session of the tiny world model.
func world(ctx context.Context, root, out string, chunks int) error {
	w, err := tinyworld.New(client.WithCheckpointRoot(root))
	if err != nil {
		return err
	}
	defer w.Close()

	p := tinyworld.DefaultGenerateParams()
	p.Prompt = "a lighthouse at dusk"
	p.NumFrames = 17
	p.Height, p.Width = 64, 64
	clip, err := w.Generate(ctx, p)
	if err != nil {
		return err
	}
	clipPath := filepath.Join(out, "generate.gif")
	if err := artifactio.WriteGIF(clipPath, clip.Video, nil); err != nil {
		return err
	}
	if err := artifactio.WritePreview(artifactio.PreviewPath(clipPath), clip.Video); err != nil {
		return err
	}

	sess, err := w.StepStream(ctx, tinyworld.DefaultStepParams(),
		stream.WithMaxChunks(chunks), stream.WithControls(stream.Controls{"right": 1}))
	if err != nil {
		return err
	}
	var videos []*tensor.Video
	for ch, err := range sess.Chunks(ctx) {
		if err != nil {
			return err
		}
		if ch.Index == chunks/2 { // turn half way through
			if err := sess.SetControls(stream.Controls{"forward": 1}); err != nil {
				return err
			}
		}
		videos = append(videos, ch.Video)
	}
	all, err := artifactio.ConcatVideos(videos...)
	if err != nil {
		return err
	}
	streamPath := filepath.Join(out, "stream.gif")
	if err := artifactio.WriteGIF(streamPath, all, nil); err != nil {
		return err
	}
	st := sess.Stats()
	fmt.Printf("streamed %d chunks (%d frames at %d fps): first chunk %v, steady chunk p50 %v (paced to playback time, %d late)\n",
		st.Chunks, st.Frames, sess.Spec().FPS, st.FirstChunk.Round(time.Microsecond), st.Steady.P50.Round(time.Microsecond), st.Late)
	abs, _ := filepath.Abs(out)
	fmt.Printf("outputs: %s, %s, %s (in %s)\n", clipPath, artifactio.PreviewPath(clipPath), streamPath, abs)
	if _, err := os.Stat(streamPath); err != nil {
		return err
	}
	return nil
}

// learnedWorld trains the world model on its simulator (first run only),
// plays worldmodel.DemoEpisodes random episodes through the generated
// client's stream, measures them against the simulator, and writes a
// rollout beside the simulator's frames to out/worldmodel.gif.
func learnedWorld(ctx context.Context, out string) error {
	root := filepath.Join(out, "worldmodel")
	start := time.Now()
	rep, err := worldmodel.Ensure(ctx, root)
	if err != nil {
		return err
	}
	if rep != nil {
		threads := "threads"
		if rep.Threads == 1 {
			threads = "thread"
		}
		fmt.Printf("worldmodel: trained in %.1fs (python3-torch on %d %s, %d steps of %d transitions; %v with start-up); next frame exactly right in %.4f of held-out transitions\n",
			rep.Seconds, rep.Threads, threads, rep.Steps, rep.Batch, time.Since(start).Round(100*time.Millisecond), rep.FrameAccuracy)
	} else {
		fmt.Printf("worldmodel: using the trained checkpoint cached in %s\n", root)
	}
	w, err := learned.New(client.WithCheckpointRoot(root), client.WithDevice("cpu"))
	if err != nil {
		return err
	}
	defer w.Close()
	start = time.Now()
	q, _, err := worldmodel.Evaluate(ctx, w, worldmodel.RandomEpisodes(worldmodel.DemoSeed, worldmodel.DemoEpisodes, worldmodel.DemoSteps))
	if err != nil {
		return err
	}
	fmt.Printf("worldmodel: %v (streamed through worldmodel.PlayStream in %v)\n", q, time.Since(start).Round(time.Millisecond))

	// A scripted walk for the GIF: right, up, left, a pause, down, right.
	ep := worldmodel.Episode{Start: worldmodel.State{
		Sprite: worldmodel.Point{X: 4, Y: 22}, Ball: worldmodel.Point{X: 20, Y: 6}, Velocity: worldmodel.Point{X: 1, Y: 1}}}
	for _, leg := range []struct {
		a worldmodel.Action
		n int
	}{{worldmodel.Right, 10}, {worldmodel.Up, 8}, {worldmodel.Left, 6}, {worldmodel.None, 4}, {worldmodel.Down, 6}, {worldmodel.Right, 6}} {
		for range leg.n {
			ep.Actions = append(ep.Actions, leg.a)
		}
	}
	model, err := worldmodel.Rollout(ctx, w, ep)
	if err != nil {
		return err
	}
	first := ep.StartFrames()
	video, err := worldmodel.SideBySide(append(slices.Clone(first), model...), append(slices.Clone(first), ep.Frames()...), float64(learned.Spec().Realtime.FPS))
	if err != nil {
		return err
	}
	gifPath := filepath.Join(out, "worldmodel.gif")
	if err := artifactio.WriteGIF(gifPath, video, nil); err != nil {
		return err
	}
	fmt.Printf("worldmodel: %s shows the model (left) beside the simulator (right) on %d scripted steps\n", gifPath, len(ep.Actions))
	return q.Check()
}
