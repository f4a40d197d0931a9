// Command sharded is a sharded embedding job: the tiny encoder
// (manifests/tiny-encoder.yaml, generated/tinyencoder) embeds N token
// sequences, split across the workers of a torchrun job, and rank 0 gets
// every embedding in input order.
//
// Run alone it embeds everything itself:
//
//	go run ./examples/sharded -items 4096
//
// Under torchrun each worker runs a contiguous share of the items — in
// batches of the task's max batch size, padded and retried on
// out-of-memory on its own device, as a single process would — and the
// shares are gathered on rank 0 (on every rank with -every-rank):
//
//	go build -o sharded ./examples/sharded
//	torchrun --nproc_per_node 2 --redirects 2 --tee 2 --no_python ./sharded -items 4096
//
// (--redirects and --tee work around torch 1.13's launcher on Python 3.11;
// torch 2.4+ built without libuv, such as Debian's 2.6, needs the launcher
// started through torchrun.Bootstrap: docs/processes.md, "torchrun".) On N
// machines, start the same command on each with torchrun's multi-node
// flags (docs/processes.md, "Process groups"). The program is
// the generated EmbedBatch method with one extra option, dist.Sharded(g);
// nothing else changes. Rank 0 prints one JSON line: the items, a sha256 of
// all embeddings in order (equal to the single-process run's: shares start
// at multiples of the max batch size, so every forward call is one the
// single process makes too), the throughput, the slowest rank's compute
// time and the rest of the wall time, which is the gather's overhead.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/worldfoundry/wfgen/examples/tinymodels"
	"github.com/worldfoundry/wfgen/generated/tinyencoder"
	"github.com/worldfoundry/wfgen/runtime/batch"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/dist"
	"github.com/worldfoundry/wfgen/runtime/proc/torchrun"
	_ "github.com/worldfoundry/wfgen/runtime/torch"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// report is the JSON line the receiving ranks print.
type report struct {
	Rank      int    `json:"rank"`
	WorldSize int    `json:"world_size"`
	Backend   string `json:"backend,omitempty"`
	// AgentStore says the group met at the launcher's store
	// (TORCHELASTIC_USE_AGENT_STORE), not one that rank 0 hosted.
	AgentStore bool   `json:"agent_store,omitempty"`
	Device     string `json:"device"`
	Items      int    `json:"items"`
	Tokens     int    `json:"tokens_per_item"`
	// SHA256 is the digest of every embedding's float32 bytes, in order.
	SHA256 string `json:"sha256"`
	// ItemsRun is the all_reduce sum of the items each rank ran: Items.
	ItemsRun       int64   `json:"items_run"`
	Seconds        float64 `json:"seconds"`
	ItemsPerSecond float64 `json:"items_per_second"`
	// ComputeSeconds is the slowest rank's time to embed its share;
	// GatherSeconds the rest of Seconds: sending the shares to the
	// receivers and putting them together.
	ComputeSeconds float64 `json:"compute_seconds"`
	GatherSeconds  float64 `json:"gather_seconds"`
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sharded", flag.ContinueOnError)
	fs.SetOutput(stderr)
	items := fs.Int("items", 4096, "token sequences to embed")
	tokens := fs.Int("tokens", 64, "tokens per sequence")
	dir := fs.String("checkpoints", filepath.Join(os.TempDir(), "wfgen-sharded"), "folder for the tiny encoder's checkpoint (built if missing; local rank 0 of each node builds it)")
	timeout := fs.Duration("timeout", 10*time.Minute, "bound of joining and of every collective")
	everyRank := fs.Bool("every-rank", false, "gather the embeddings on every rank, not rank 0 only")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *items < 1 || *tokens < 1 {
		fmt.Fprintln(stderr, "sharded: -items and -tokens must be positive")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := embed(ctx, stdout, *dir, *items, *tokens, *timeout, *everyRank); err != nil {
		fmt.Fprintln(stderr, "sharded:", err)
		return 1
	}
	return 0
}

func embed(ctx context.Context, stdout io.Writer, dir string, n, tokens int, timeout time.Duration, everyRank bool) error {
	// Under torchrun, join the job's process group; alone, g stays nil and
	// the batch runs unsharded.
	var g *dist.Group
	w, werr := torchrun.WorkerFromEnv()
	if _, set := os.LookupEnv("RANK"); set && werr != nil {
		return werr // half a torchrun environment is a mistake, not a single process
	}
	if werr == nil {
		var err error
		if g, err = dist.Join(ctx, dist.WithTimeout(timeout)); err != nil {
			return err
		}
		defer g.Close()
	}
	e, err := engine.DefaultEngine()
	if err != nil {
		return err
	}
	device := ""
	if g != nil {
		// One device per local worker: cuda:LOCAL_RANK, or cpu.
		if device, err = w.LocalDevice(engine.CUDADevices(e)); err != nil {
			return err
		}
	}

	// Local rank 0 of each node builds the checkpoint; the others wait.
	path := filepath.Join(dir, tinymodels.Files["tiny-encoder"])
	if werr != nil || w.LocalRank == 0 {
		if err := tinymodels.BuildEncoder(path); err != nil {
			return err
		}
	}
	if g != nil {
		if err := g.Barrier(ctx); err != nil {
			return err
		}
	}
	enc, err := tinyencoder.New(client.WithCheckpointRoot(dir), client.WithDevice(device))
	if err != nil {
		return err
	}
	defer enc.Close()
	dev, _, err := enc.Backend().(client.Loader).Load() // loads the model now
	if err != nil {
		return err
	}

	params := make([]tinyencoder.EmbedParams, n)
	for i := range params {
		p := tinyencoder.DefaultEmbedParams()
		ids := make([]int64, tokens)
		for j := range ids {
			ids[j] = int64((i*131 + j*7 + i*j) % tinymodels.EncoderVocab)
		}
		p.Tokens = tensor.FromInt64(ids, int64(tokens))
		params[i] = p
	}
	// Warm up (TorchScript optimises a method during its first calls) on
	// this rank alone, before the clock starts.
	if _, err := enc.EmbedBatch(ctx, params[:min(n, 16)]); err != nil {
		return err
	}
	var opts []dist.ShardOption
	if everyRank {
		opts = append(opts, dist.OnEveryRank())
	}
	if g != nil {
		if err := g.Barrier(ctx); err != nil { // start the clock together
			return err
		}
	}
	start := time.Now()
	var compute time.Duration
	var ran int
	stats := batch.WithStats(func(s batch.Stats) { compute, ran = time.Since(start), s.Done })
	res, err := enc.EmbedBatch(ctx, params, dist.Sharded(g, opts...), stats)
	if err != nil {
		return err
	}
	wall := time.Since(start)

	r := report{WorldSize: 1, Device: dev, Items: n, Tokens: tokens, ItemsRun: int64(ran),
		Seconds: wall.Seconds(), ComputeSeconds: compute.Seconds()}
	if g != nil {
		r.Rank, r.WorldSize, r.Backend, r.AgentStore = g.Rank(), g.Size(), g.Backend(), w.AgentStore
		// Every rank all-reduces what it ran and how long it took.
		count := tensor.FromInt64([]int64{int64(ran)}, 1)
		if err := g.AllReduce(ctx, count, dist.Sum); err != nil {
			return err
		}
		slowest := tensor.FromFloat32([]float32{float32(compute.Seconds())}, 1)
		if err := g.AllReduce(ctx, slowest, dist.Max); err != nil {
			return err
		}
		c, _ := count.Int64s()
		s, _ := slowest.Float32s()
		r.ItemsRun, r.ComputeSeconds = c[0], float64(s[0])
	}
	if res == nil {
		return nil // the embeddings went to rank 0
	}
	if len(res) != n {
		return fmt.Errorf("got %d embeddings for %d items", len(res), n)
	}
	h := sha256.New()
	for i, x := range res {
		if x == nil || x.Embedding == nil || x.Embedding.Vector == nil {
			return fmt.Errorf("item %d has no embedding", i)
		}
		h.Write(x.Embedding.Vector.Data)
	}
	r.SHA256 = hex.EncodeToString(h.Sum(nil))
	r.ItemsPerSecond = float64(n) / wall.Seconds()
	r.GatherSeconds = max(0, r.Seconds-r.ComputeSeconds)
	if r.ItemsRun != int64(n) {
		return errors.New("the ranks ran " + fmt.Sprint(r.ItemsRun) + " items, not " + fmt.Sprint(n))
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s\n", b)
	return err
}
