// Command wfserve serves model families over the Open Inference Protocol
// (KServe v2) REST API, and its gRPC API with -grpc-addr: it validates the
// manifests given as arguments, loads every variant's checkpoint through
// libtorch and answers health,
// metadata, readiness and infer requests, realtime streams as Server-Sent
// Events (over gRPC: on one bidirectional RPC), with optional
// cross-request batching and bearer-token auth, and the playground (a web
// page per family, docs/playground.md) at /. On SIGTERM or SIGINT it
// stops being ready, refuses new work, drains the requests in flight (REST
// and gRPC) and exits. See docs/serving.md.
//
//	wfserve [flags] MANIFEST_OR_FOLDER...
//	wfserve [flags] -repository DIR [MANIFEST_OR_FOLDER...]
//
// With -repository, the families are those of the manifests in a model
// repository, a folder that holds them and their checkpoints (a manifest
// or checkpoint resolving outside it is refused); -model-control poll
// reloads a model when its files change, without downtime
// (docs/operating.md).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"

	"github.com/worldfoundry/wfgen/gen/validate"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/logctx"
	"github.com/worldfoundry/wfgen/runtime/serve"
	"github.com/worldfoundry/wfgen/runtime/spec"
	_ "github.com/worldfoundry/wfgen/runtime/torch"
)

const usage = `usage: wfserve [flags] MANIFEST_OR_FOLDER...
       wfserve [flags] -repository DIR [MANIFEST_OR_FOLDER...]
Serves the families of the manifests (folders are searched for *.yaml, *.yml,
*.json) over the Open Inference Protocol REST API (and its gRPC API with
-grpc-addr). Exit 0 after a clean shutdown, 1 when a manifest is invalid or
a model fails to load, 2 on usage errors.`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// options are wfserve's flags: the server's configuration and the
// command's own settings.
type options struct {
	cfg                                            serve.Config
	addr, grpcAddr, addrFile, root, device, dtype  *string
	tokenFile, keyFile, sessionKeyFile, repository *string
	pollSecs                                       *float64
	drain                                          *time.Duration
	noWarmup, metrics, pages                       *bool
}

// flags defines wfserve's flags (docs/serving.md's table is made from
// them: TestFlagTable), their usage written to stderr.
func flags(stderr io.Writer) (*flag.FlagSet, *options) {
	fs := flag.NewFlagSet("wfserve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), usage)
		fmt.Fprintln(fs.Output(), "\nflags:")
		fs.PrintDefaults()
	}
	f := &options{}
	cfg := &f.cfg
	f.addr = fs.String("addr", ":8080", "listen `address` (port 0: a free port the kernel picks)")
	f.grpcAddr = fs.String("grpc-addr", "", "also serve the protocol's gRPC API (and realtime sessions on its bidirectional RPC) on `address` (default: no gRPC)")
	f.addrFile = fs.String("addr-file", "", "once listening, write the addresses listened on to `FILE` as one JSON line ({\"addr\":…,\"grpc_addr\":…}), removed at exit")
	f.root = fs.String("checkpoint-root", "", "`folder` relative checkpoint URIs resolve against after the manifest's folder (default $WORLDFOUNDRY_CHECKPOINT_ROOT)")
	f.device = fs.String("device", "", "`device` to run on: cpu, cuda, cuda:N (default cuda, else cpu)")
	f.dtype = fs.String("dtype", "", "`dtype`: auto, float32, float16, bfloat16")
	f.tokenFile = fs.String("token-file", "", "read the bearer token every request but the health probes must carry from `FILE`")
	f.repository = fs.String("repository", "", "serve the manifests of the model repository `DIR` (searched like a folder argument), whose manifests and checkpoints must stay inside it (docs/operating.md)")
	fs.StringVar(&f.cfg.ModelControl, "model-control", serve.ControlNone, "how models load: none (every model at start), explicit (those of -load-model at start, the others on POST /v2/repository/models/NAME/load; unload frees them; a load of a loaded model reloads what changed) or poll (every model at start, reloaded without downtime when its manifest or checkpoint changes; a manifest added to the -repository tree is loaded, a removed one unloaded)")
	f.pollSecs = fs.Float64("repository-poll-secs", serve.DefaultPollInterval.Seconds(), "with -model-control poll, how often to look for added, removed and changed manifests and checkpoints, in `seconds`")
	fs.Func("load-model", "with -model-control explicit, a `MODEL` to load at start (repeat, or separate with commas)", func(v string) error {
		for name := range strings.SplitSeq(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				f.cfg.StartupModels = append(f.cfg.StartupModels, name)
			}
		}
		return nil
	})
	fs.Func("model-memory", "resident-memory budget of the loaded models, in `bytes` with an optional unit (2GiB, 512MiB, 1.5GB): models load on their first request, each charged its checkpoint file's size, and the least recently used unpinned ones are evicted when the next would not fit; with -model-control poll a reload is charged beside the serving revision; not with -model-control explicit (docs/operating.md, Memory; default: none)", func(v string) error {
		n, err := parseBytes(v)
		if err != nil {
			return err
		}
		if n <= 0 {
			return fmt.Errorf("%q: want a positive size", v)
		}
		cfg.ModelMemory = n
		return nil
	})
	fs.DurationVar(&cfg.ModelKeepAlive, "model-keep-alive", 0, "unload a model idle this long, under -model-memory or not (it loads again on its next request); 0: keep it (models load on request whenever this, -model-memory or -pin-model is set)")
	fs.Func("pin-model", "a `MODEL` loaded at start and never evicted by -model-memory or -model-keep-alive (repeat, or separate with commas)", func(v string) error {
		for name := range strings.SplitSeq(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				cfg.PinModels = append(cfg.PinModels, name)
			}
		}
		return nil
	})
	f.keyFile = fs.String("key-file", "", "read named API keys (each with optional models and a rate) from `FILE` instead of one token; reread on SIGHUP (docs/serving.md, Keys and quotas)")
	f.sessionKeyFile = fs.String("session-key-file", "", "read the key that seals realtime sessions' snapshots from `FILE` (its bytes, white space trimmed, at least 16; the same file on every replica): without it snapshot and restore requests are refused (501)")
	f.drain = fs.Duration("drain-timeout", 30*time.Second, "how long shutdown waits for requests in flight")
	fs.Int64Var(&cfg.MaxBodyBytes, "max-body", serve.DefaultMaxBodyBytes, "largest request body or gRPC message, in `bytes` (413 beyond)")
	fs.Int64Var(&cfg.MaxTensorBytes, "max-tensor", serve.DefaultMaxTensorBytes, "largest decoded input tensor, in `bytes` (400 beyond)")
	fs.Int64Var(&cfg.MaxInflightBytes, "max-inflight-bytes", 0, "`bytes` the requests in flight may hold: bodies, what decoding them takes, decoded tensors (429 beyond; default 4 × -max-body)")
	fs.DurationVar(&cfg.IdleTimeout, "idle-timeout", serve.DefaultIdleTimeout, "close a keep-alive connection idle this long")
	fs.DurationVar(&cfg.Timeout, "timeout", serve.DefaultTimeout, "deadline of one infer request from its arrival, body included (408 for a body still arriving, 504 for an answer; negative: none)")
	fs.IntVar(&cfg.MaxQueue, "max-queue", serve.DefaultMaxQueue, "infer requests admitted at once, queued or running (429 beyond)")
	fs.IntVar(&cfg.MaxConcurrent, "max-concurrent", 1, "engine calls at once per model variant: requests, batches and stream chunks (libtorch spreads one call over its threads)")
	fs.BoolVar(&cfg.Batching, "batch", false, "merge concurrent requests to batchable tasks into batches (max_batch_size of the task)")
	fs.DurationVar(&cfg.BatchDelay, "batch-delay", 0, "how long the oldest queued request waits for others to join its batch")
	fs.IntVar(&cfg.DefaultPriority, "default-priority", serve.DefaultPriority, "the priority level of an infer request whose \"priority\" parameter is 0 or absent (1 is served first, larger levels later)")
	fs.BoolVar(&cfg.BatchInvariant, "batch-invariant", true, "with -batch, pad every batched forward call to a size that gives the bits of the task's max batch size (measured once per machine), so an answer never depends on how requests were grouped")
	f.noWarmup = fs.Bool("no-warmup", false, "skip the warm-up of tasks whose manifest has a warmup block (ready sooner, first requests slower)")
	fs.IntVar(&cfg.MaxSessions, "max-sessions", serve.DefaultMaxSessions, "realtime streams open at once (429 beyond)")
	f.metrics = fs.Bool("metrics", true, "serve Prometheus metrics at GET /metrics (with the bearer token when -token-file is set)")
	f.pages = fs.Bool("playground", true, "serve the playground, a web page per family, at / (docs/playground.md)")
	return fs, f
}

func run(args []string, stdout, stderr io.Writer) int {
	fs, f := flags(stderr)
	cfg := &f.cfg
	addr, grpcAddr, addrFile, root, device, dtype := f.addr, f.grpcAddr, f.addrFile, f.root, f.device, f.dtype
	tokenFile, keyFile, drain, noWarmup, metrics, pages := f.tokenFile, f.keyFile, f.drain, f.noWarmup, f.metrics, f.pages
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() == 0 && *f.repository == "" {
		fs.Usage()
		return 2
	}
	if *f.pollSecs <= 0 {
		fmt.Fprintf(stderr, "wfserve: -repository-poll-secs %v: want a positive number of seconds\n", *f.pollSecs)
		return 2
	}
	cfg.PollInterval = time.Duration(*f.pollSecs * float64(time.Second))
	if cfg.ModelControl == serve.ControlExplicit && (cfg.ModelMemory > 0 || cfg.ModelKeepAlive > 0 || len(cfg.PinModels) > 0) {
		fmt.Fprintf(stderr, "wfserve: -model-control explicit with -model-memory, -model-keep-alive or -pin-model: %v\n", serve.ErrExplicitWithMemory)
		return 2
	}
	if _, err := logctx.Configure(logctx.Options{Writer: stderr, Force: true}); err != nil {
		fmt.Fprintf(stderr, "wfserve: %v\n", err)
		return 2
	}
	log := logctx.Logger()
	cfg.DisableMetrics = !*metrics
	cfg.DisablePlayground = !*pages
	tp, stopTracing, otlpEndpoint, err := tracing(context.Background(), log) // tracing.go: the OTEL_* variables
	if err != nil {
		fmt.Fprintf(stderr, "wfserve: %v\n", err)
		return 2
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		stopTracing(ctx) // flushes the spans not yet exported
	}()
	if tp != nil {
		cfg.TracerProvider = tp
	}
	if *keyFile != "" {
		if *tokenFile != "" {
			fmt.Fprintln(stderr, "wfserve: -token-file and -key-file both given: use one (a token is a key file's one key)")
			return 2
		}
		keys, err := serve.LoadKeys(*keyFile)
		if err != nil {
			fmt.Fprintf(stderr, "wfserve: %v\n", err)
			return 2
		}
		cfg.Keys = keys
	}
	if *f.sessionKeyFile != "" {
		if cfg.SessionKey, err = serve.LoadSessionKey(*f.sessionKeyFile); err != nil {
			fmt.Fprintf(stderr, "wfserve: %v\n", err)
			return 2
		}
	}
	if *tokenFile != "" {
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			fmt.Fprintf(stderr, "wfserve: %v\n", err)
			return 2
		}
		cfg.Token = strings.TrimSpace(string(b))
		if cfg.Token == "" {
			fmt.Fprintf(stderr, "wfserve: token file %s is empty\n", *tokenFile)
			return 2
		}
	}

	paths := fs.Args()
	if *f.repository != "" {
		paths = append([]string{*f.repository}, paths...)
	}
	fams, diags, err := validate.Paths(paths)
	if err != nil {
		fmt.Fprintf(stderr, "wfserve: %v\n", err)
		return 2
	}
	if len(diags) > 0 {
		validate.WriteDiagnostics(stderr, "text", diags)
		fmt.Fprintf(stderr, "wfserve: %d problem(s) in the manifests\n", len(diags))
		return 1
	}
	if len(fams) == 0 {
		fmt.Fprintf(stderr, "wfserve: no manifests found in %s\n", strings.Join(paths, " "))
		return 2
	}
	cfg.NoWarmup = *noWarmup
	cfg.ReadManifest = readManifest
	familyOf := func(sp *spec.ModelInferenceSpec, path string) serve.Family {
		opts := []client.Option{client.WithManifestDir(filepath.Dir(path)), client.WithDevice(*device), client.WithDType(*dtype)}
		if *root != "" {
			opts = append(opts, client.WithCheckpointRoot(*root))
		}
		return serve.Family{Spec: sp, Options: opts, Manifest: path, Repository: repositoryOf(*f.repository, path)}
	}
	var families []serve.Family
	for _, fam := range fams {
		families = append(families, familyOf(fam.Spec, fam.File.Path))
	}
	if *f.repository != "" {
		// Poll mode adds the manifests added to the tree and unloads the
		// models of those removed.
		repo := *f.repository
		cfg.Discover = func() ([]string, error) { return validate.Options{}.Files([]string{repo}) }
		cfg.OpenFamily = func(path string) (serve.Family, error) {
			sp, err := readManifest(path)
			if err != nil {
				return serve.Family{}, err
			}
			return familyOf(sp, path), nil
		}
	}
	srv, err := serve.New(*cfg, families...)
	if err != nil {
		fmt.Fprintf(stderr, "wfserve: %v\n", err)
		return 1
	}
	defer srv.Close()
	gogc, memLimit := tuneCollector(srv.Config().MaxInflightBytes)
	start := time.Now()
	if err := srv.Load(); err != nil {
		fmt.Fprintf(stderr, "wfserve: %v\n", err)
		return 1
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(stderr, "wfserve: %v\n", err)
		return 2
	}
	var gln net.Listener
	if *grpcAddr != "" {
		if gln, err = net.Listen("tcp", *grpcAddr); err != nil {
			ln.Close()
			fmt.Fprintf(stderr, "wfserve: %v\n", err)
			return 2
		}
	}
	if *addrFile != "" {
		if err := writeAddrFile(*addrFile, ln, gln); err != nil {
			ln.Close()
			if gln != nil {
				gln.Close()
			}
			fmt.Fprintf(stderr, "wfserve: -addr-file: %v\n", err)
			return 2
		}
		defer os.Remove(*addrFile)
	}
	names := make([]string, len(fams))
	for i, f := range fams {
		names[i] = f.Spec.ModelFamilyID
	}
	log.Info("serving", slog.String("addr", ln.Addr().String()), slog.Any("models", names),
		slog.Bool("batching", cfg.Batching), slog.Bool("auth", cfg.Token != "" || cfg.Keys != nil),
		slog.Int64("model_memory", cfg.ModelMemory), slog.Duration("model_keep_alive", cfg.ModelKeepAlive), slog.Any("pinned", cfg.PinModels),
		slog.Bool("metrics", *metrics), slog.String("otlp_traces", otlpEndpoint),
		slog.Uint64("gogc", gogc), slog.Uint64("memory_limit", memLimit),
		slog.Float64("load_s", time.Since(start).Seconds()))
	if gln != nil {
		log.Info("serving grpc", slog.String("grpc_addr", gln.Addr().String()))
	}

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	hup := make(chan os.Signal, 1) // before serving: a SIGHUP must never find the default action
	if cfg.Keys != nil {
		signal.Notify(hup, syscall.SIGHUP)
	}
	hs := srv.HTTPServer()
	served := make(chan error, 2) // the HTTP and gRPC servers
	go func() { served <- hs.Serve(ln) }()
	var gs *grpc.Server
	if gln != nil {
		gs = srv.GRPCServer()
		go func() { served <- gs.Serve(gln) }()
	}
wait:
	for {
		select {
		case err := <-served:
			fmt.Fprintf(stderr, "wfserve: %v\n", err)
			return 1
		case <-hup:
			// The keys in use stay when the file is wrong.
			if err := cfg.Keys.Reload(*keyFile); err != nil {
				log.Error("keys not reloaded", slog.String("error", err.Error()))
			} else {
				log.Info("keys reloaded", slog.Any("keys", cfg.Keys.Names()))
			}
		case s := <-sig:
			log.Info("shutting down", slog.String("signal", s.String()), slog.Duration("drain_timeout", *drain))
			break wait
		}
	}
	signal.Stop(hup)
	// The drain keeps the handler, and so does everything after it until
	// the process exits: a second SIGTERM or SIGINT (a process group's
	// signal that `go tool` relays too, an impatient operator) must not
	// kill the process mid-drain, nor between the drain's end and the exit
	// (it did when the handler was stopped as run returned: a drain with
	// nothing in flight ends at once). -drain-timeout bounds the drain.
	go func() {
		for s := range sig {
			log.Info("signal during the drain: still draining", slog.String("signal", s.String()), slog.Duration("drain_timeout", *drain))
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), *drain)
	defer cancel()
	// Drain first, with the listener open: requests in flight finish,
	// new ones get 503 with Connection: close, and every keep-alive
	// connection closes after an answer. Only then stop accepting and
	// close what is left idle.
	code := 0
	if err := srv.Shutdown(ctx); err != nil {
		log.Error("drain", slog.String("error", err.Error()))
		code = 1
	}
	if err := hs.Shutdown(ctx); err != nil {
		log.Error("http shutdown", slog.String("error", err.Error()))
		code = 1
	}
	if gs != nil && !grpcStop(ctx, gs) {
		log.Error("grpc shutdown", slog.String("error", "calls still running at the drain timeout: stopped"))
		code = 1
	}
	log.Info("stopped")
	return code
}

// grpcStop stops a gRPC server gracefully (no new calls, the running ones
// finish), or at once when ctx ends first; it reports whether it was
// graceful.
func grpcStop(ctx context.Context, gs *grpc.Server) bool {
	done := make(chan struct{})
	go func() {
		gs.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		gs.Stop()
		<-done
		return false
	}
}
