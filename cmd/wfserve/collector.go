package main

import (
	"os"
	"runtime/debug"
	"runtime/metrics"
)

// Go's collector, tuned for a model server. The server's own heap is a few
// MiB (a heap goal of 5.7 MB serving the tiny encoder), so with the default
// GOGC of 100 a collection runs every few MiB allocated — 60 a second at
// 9,500 requests a second — and each one also shrinks the stacks that the
// next requests grow again. GOGC 400 runs a fifth as many (12 a second); on
// the tiny encoder over gRPC at 32 clients it took the server's CPU per
// request from 118 to 84 µs (docs/benchmarks/README.md, "Go's collector").
// A request's tensors
// are another matter: they are bounded by -max-inflight-bytes, and with
// GOGC 400 alone the heap could grow to five times what requests in flight
// hold. The soft memory limit keeps the heap within what GOGC 100 allowed
// (twice the in-flight bytes) plus limitSlack, so the documented memory
// bound (docs/serving.md, "Memory") still holds.
const (
	serverGOGC = 400
	limitSlack = 32 << 20
)

// tuneCollector sets GOGC to serverGOGC and the soft memory limit to twice
// inflight (the server's -max-inflight-bytes in force) plus limitSlack,
// each only when the environment does not set it (GOGC, GOMEMLIMIT), and
// returns the GOGC and memory limit in force.
func tuneCollector(inflight int64) (gogc, memoryLimit uint64) {
	if _, ok := os.LookupEnv("GOGC"); !ok {
		debug.SetGCPercent(serverGOGC)
	}
	if _, ok := os.LookupEnv("GOMEMLIMIT"); !ok {
		debug.SetMemoryLimit(2*inflight + limitSlack)
	}
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/gomemlimit:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}
