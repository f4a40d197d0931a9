# wfgen — the two commands a newcomer needs are `make demo` and `make test`;
# both install what they need first (scripts/setup.sh, Debian packages).

GO      ?= go
PKGS    ?= ./...
BENCH   ?= .
COUNT   ?= 5

# The next supported Go release; the go command fetches it from the module
# proxy (GOTOOLCHAIN).
GO_NEXT ?= go1.27.3

.PHONY: setup generate test zoo quick test-go-next test-libtorch2 demo bench bench-compare bench-players golden check fuzz

## setup: install libtorch and Debian's python torch when missing
setup:
	@bash scripts/setup.sh

## generate: regenerate the schema, and generated/ from manifests/ (the
## inputs and output folder in wfgen.yaml)
generate:
	$(GO) run ./cmd/wfgen schema > schema/manifest.schema.json.tmp && mv schema/manifest.schema.json.tmp schema/manifest.schema.json
	$(GO) run ./cmd/wfgen generate --clean

## check: the quick CI gate — formatting, vet, validation, generated code current
check:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet $(PKGS)
	@# the benchmark-only shim loops (-tags wfbench) keep compiling
	$(GO) vet -tags wfbench ./runtime/torch/...
	CGO_ENABLED=0 $(GO) build ./cmd/wfgen ./runtime/spec ./runtime/tensor ./runtime/engine
	@# and without cgo (the engine builds as its stub)
	CGO_ENABLED=0 $(GO) vet $(PKGS)
	$(GO) run ./cmd/wfgen validate
	$(GO) run ./cmd/wfgen generate --check

## test: everything — setup, check, all tests with the race detector, the demo
test: setup check
	$(GO) test -race -timeout 20m $(PKGS)
	@# scheduler behaviour is measured without the race detector's threads
	$(GO) test -count=1 -run 'TestBackToBackCallsKeepSchedulerQuiet' ./runtime/torch/
	$(MAKE) --no-print-directory demo

## zoo: the whole zoo (internal/zoo: every torchvision 0.14 model that
## scripts, import → validate → generate → run with no edit, compared with
## PyTorch bit for bit) and its table written to docs/zoo.md; make test runs
## a fast subset
zoo: setup
	WFGEN_ZOO=all WFGEN_ZOO_TABLE=$(CURDIR)/docs/zoo.md $(GO) test -count=1 -timeout 60m -run '^TestZoo$$$$' -v ./internal/zoo

## quick: the quick suite — go vet and the tests without the race detector
## (the scheduler measurement, which make test runs alone, is left out)
quick:
	$(GO) vet $(PKGS)
	$(GO) test -timeout 20m -skip '^TestBackToBackCallsKeepSchedulerQuiet$$' $(PKGS)

## test-go-next: the quick suite under Go $(GO_NEXT)
test-go-next: setup
	GOTOOLCHAIN=$(GO_NEXT) $(MAKE) --no-print-directory quick

## test-libtorch2: engine, client, e2e, importer, torchrun and zoo (fast subset) tests against
## libtorch 2.6 in a Debian trixie chroot (cached; needs root, see docs/engine.md)
test-libtorch2:
	@bash scripts/libtorch2-lane.sh test

## demo: the main job end to end (see README): bindings generated, tiny
## checkpoints built from TorchScript source, batched embedding, the digits
## CNN (trained with python3-torch on first run, cached in out/digits) read
## batched with its accuracy printed, realtime stream, and the learned world
## model (trained on first run, cached in out/worldmodel; docs/worldmodel.md)
## played against its simulator with its position accuracy and pixel error
## printed and out/worldmodel.gif written
demo: setup
	$(GO) run ./cmd/wfgen generate
	$(GO) run ./examples/demo

## bench: benchmarks whose figures are in docs/benchmarks/README.md, then the
## serving load test (wfserve with and without batching vs a Python server)
## and JSON vs binary tensors (an image in, a video out), and realtime
## latency across processes (in-process, WebSocket, gRPC stream)
bench: setup
	$(GO) test -tags wfbench -run '^$$' -bench '$(BENCH)' -benchmem -count $(COUNT) $(PKGS)
	$(GO) run ./runtime/serve/internal/servebench -soak 2m
	$(GO) run ./runtime/serve/internal/binbench
	$(GO) run ./runtime/serve/internal/rtbench

## bench-compare: the comparisons with peers (C++ loop, Python, eager vs
## compiled, FastAPI) in one run, printed as the table in docs/benchmarks/README.md
## (ROUNDS=n rounds per interleaved benchmark)
ROUNDS ?= 20
bench-compare: setup
	$(GO) run ./internal/benchcompare -rounds $(ROUNDS)

## bench-players: issue 45's many-players benchmark — wfserve serving the
## world model to PLAYERS scripted WebSocket players plus a Chromium probe
## on the playground page for DURATION, with and without session batching,
## every player's frames checked against playing alone
## (docs/benchmarks/README.md, "Many players")
PLAYERS  ?= 256
DURATION ?= 10m
bench-players: setup
	$(GO) run ./runtime/serve/internal/playbench -players $(PLAYERS) -duration $(DURATION)

## golden: rewrite the golden cases from the current generator
golden:
	$(GO) test ./gen/emit -run TestGolden -update

## fuzz: run each fuzz target briefly (FUZZTIME per target)
FUZZTIME ?= 20s
fuzz:
	@for p in $$($(GO) list $(PKGS)); do \
	  for f in $$($(GO) test -list '^Fuzz' $$p 2>/dev/null | grep '^Fuzz'); do \
	    echo "== $$p $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$p || exit 1; \
	  done; \
	done
