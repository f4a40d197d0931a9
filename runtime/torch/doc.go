// Package torch is wfgen's libtorch execution engine. Importing it registers
// the engine as "libtorch" with engine.Register (the database/sql driver
// pattern); it reads TorchScript archives, and AOTInductor packages when
// built against libtorch 2.6 or later (Engine.Formats):
//
//	import _ "github.com/worldfoundry/wfgen/runtime/torch"
//
// It needs cgo and libtorch (Debian: apt-get install libtorch-dev). Built
// with CGO_ENABLED=0 it registers nothing, so execution returns
// engine.ErrNoEngine, and its exported helpers return ErrUnavailable.
//
// The C++ side is a small shim in internal/shim. Every inference is one cgo
// call: keyword arguments go in as one value blob plus pointers to the
// tensor buffers; the shim copies them into libtorch tensors on the
// module's device and dtype, runs the method under c10::InferenceMode (and
// CUDA autocast when asked, on CUDA modules), and copies the outputs back in
// the same call. Errors come back from that call; no C++ exception reaches
// Go. At most a bounded number of calls run inside libtorch at once, and the
// intra-op thread count is set once.
//
// Besides the engine.Engine, the package exports DefineModule (build
// TorchScript modules from source, for tests and bundled demo checkpoints)
// and CompileModule (freeze and fusion, with an on-disk cache).
// docs/engine.md describes the variables it reads.
package torch
