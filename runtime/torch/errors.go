package torch

import (
	"strings"

	"github.com/worldfoundry/wfgen/runtime"
)

// Error is a failure reported by libtorch (or by the shim while converting
// values). An out-of-memory failure unwraps to runtime.ErrOutOfMemory.
type Error struct {
	// Op is the operation: "load", "call", "compile", "save", "define", ...
	Op string
	// Path is the module file, when known.
	Path string
	// Method is the method called, for Op "call".
	Method string
	// Message is libtorch's message without the C++ backtrace.
	Message string
	// OOM says the failure was an allocation failure.
	OOM bool
}

// Error formats the failure as "torch: OP [METHOD] (PATH): MESSAGE".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("torch: ")
	b.WriteString(e.Op)
	if e.Method != "" {
		b.WriteString(" ")
		b.WriteString(e.Method)
	}
	if e.Path != "" {
		b.WriteString(" (")
		b.WriteString(e.Path)
		b.WriteString(")")
	}
	if e.OOM {
		b.WriteString(": out of memory")
	}
	b.WriteString(": ")
	b.WriteString(e.Message)
	return b.String()
}

// Unwrap returns runtime.ErrOutOfMemory for allocation failures.
func (e *Error) Unwrap() error {
	if e.OOM {
		return runtime.ErrOutOfMemory
	}
	return nil
}

// oomMarkers are substrings of libtorch's allocation-failure messages. The
// TorchScript interpreter re-throws failures inside a scripted method as a
// plain std::runtime_error carrying the original message, so the message is
// the only reliable signal there.
var oomMarkers = []string{
	"can't allocate memory",     // DefaultCPUAllocator (c10/core/impl/alloc_cpu.cpp)
	"cuda out of memory",        // CUDACachingAllocator
	"cuda error: out of memory", // cudaErrorMemoryAllocation outside the allocator
	"hip out of memory",         // ROCm builds
	"mps backend out of memory",
	"xpu out of memory",
	"std::bad_alloc",
	"cannot allocate memory", // strerror(ENOMEM)
	"outofmemoryerror",
}

// isOOMMessage reports whether msg is an allocation failure.
func isOOMMessage(msg string) bool {
	m := strings.ToLower(msg)
	for _, k := range oomMarkers {
		if strings.Contains(m, k) {
			return true
		}
	}
	return false
}

func newError(op, path, method string, status int, msg string) *Error {
	return &Error{Op: op, Path: path, Method: method, Message: strings.TrimSpace(msg),
		OOM: status == statusOOM || isOOMMessage(msg)}
}

// Shim status codes (checked against package shim at compile time in the cgo
// build).
const (
	statusOK    = 0
	statusError = 1
	statusOOM   = 2
)
