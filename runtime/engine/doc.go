// Package engine is the boundary between wfgen's runtime and the library
// that executes models: the Engine interface an execution backend
// implements, the registry of engines by name (Register, Lookup,
// DefaultEngine: the database/sql driver pattern; runtime/torch, libtorch
// through cgo, registers itself as "libtorch" on import), the checkpoint
// formats (an engine says which it reads; DetectFormat and ResolveFormat
// recognise a file's, ForFormat picks the registered engine that reads
// it), the Module a loaded checkpoint is, the value form that crosses the
// boundary (keyword arguments and outputs: nil, string, int64, float64,
// bool, *tensor.Tensor, []any, map[string]any; ValueOf converts Go values
// into it), method schemas and AOTInductor call specs, the optional
// capabilities only some engines have (CUDAEngine, CacheReleaser,
// Synchronizer, Compiler: found by type assertion, as database/sql/driver
// does), and the sentinel errors every layer shares (ErrNoEngine,
// ErrOutOfMemory, ErrClosed). It builds without cgo: a process that links
// no engine gets ErrNoEngine, saying what to import and install, when it
// first runs a model.
package engine
