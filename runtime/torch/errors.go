package torch

import (
	"regexp"
	"strings"

	"github.com/worldfoundry/wfgen/runtime/engine"
)

// Error is a failure reported by libtorch (or by the shim while converting
// values). An out-of-memory failure unwraps to engine.ErrOutOfMemory; a
// failure inside a TorchScript method unwraps to a *engine.ScriptError
// holding the whole traceback; a checkpoint calling a custom op no loaded
// op library registers unwraps to a *engine.UnknownOpError.
type Error struct {
	// Op is the operation: "load", "call", "compile", "save", "define", ...
	Op string
	// Path is the module file, when known.
	Path string
	// Method is the method called, for Op "call".
	Method string
	// Message is libtorch's message without the C++ backtrace. For a
	// failure inside a TorchScript method it is the interpreter's final line
	// only (Script holds the whole report).
	Message string
	// OOM says the failure was an allocation failure.
	OOM bool
	// Script, for a failure inside a TorchScript method, is the
	// interpreter's final line and whole traceback; nil otherwise.
	Script *engine.ScriptError
	// UnknownOp, for code calling a custom op that no loaded op library
	// registers, names the op and holds libtorch's report; nil otherwise.
	// Message is then its one-line message.
	UnknownOp *engine.UnknownOpError
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

// Unwrap returns engine.ErrOutOfMemory for allocation failures, the
// *engine.ScriptError of a failure inside a TorchScript method and the
// *engine.UnknownOpError of a call of an unknown custom op.
func (e *Error) Unwrap() []error {
	var errs []error
	if e.OOM {
		errs = append(errs, engine.ErrOutOfMemory)
	}
	if e.Script != nil {
		errs = append(errs, e.Script)
	}
	if e.UnknownOp != nil {
		errs = append(errs, e.UnknownOp)
	}
	return errs
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
	msg = strings.TrimSpace(msg)
	e := &Error{Op: op, Path: path, Method: method, Message: msg, OOM: status == statusOOM || isOOMMessage(msg)}
	if m := unknownOp.FindStringSubmatch(msg); m != nil {
		e.UnknownOp = &engine.UnknownOpError{Namespace: m[1], Name: m[2], Traceback: msg}
		e.Message = e.UnknownOp.Error()
		return e
	}
	if strings.Contains(msg, scriptTracebackMarker) {
		e.Script = &engine.ScriptError{Message: finalLine(msg), Traceback: msg}
		e.Message = e.Script.Message
	}
	return e
}

// unknownOp matches the message with which libtorch's TorchScript compiler
// refuses a call of an op no library registered ("Unknown builtin op:
// torchvision::nms.", then the code that calls it), capturing the op's
// namespace and name.
var unknownOp = regexp.MustCompile(`Unknown builtin op: ([A-Za-z_][A-Za-z0-9_]*)::([A-Za-z_][A-Za-z0-9_]*)`)

// scriptTracebackMarker starts the traceback the TorchScript interpreter
// prints for a failure inside a method ("Traceback of TorchScript (most
// recent call last):", or "..., serialized code (...)" and "..., original
// code (...)").
const scriptTracebackMarker = "Traceback of TorchScript"

// finalLine returns the line of an interpreter report that says what
// failed: the last line that starts with an exception name and ": "
// ("RuntimeError: mat1 and mat2 shapes cannot be multiplied (1x4 and 3x2)"),
// else the last line that is neither blank, nor a "File ..." line, nor a
// "~~~ <--- HERE" marker.
func finalLine(report string) string {
	lines := strings.Split(report, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if isExceptionLine(lines[i]) {
			return strings.TrimSpace(lines[i])
		}
	}
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if l != "" && !strings.HasPrefix(l, "File ") && !strings.HasSuffix(l, "<--- HERE") {
			return l
		}
	}
	return report
}

// isExceptionLine reports whether l starts, unindented, with an exception
// name (a dotted identifier ending in Error or Exception) and ": ".
func isExceptionLine(l string) bool {
	name, _, ok := strings.Cut(l, ": ")
	if !ok || !(strings.HasSuffix(name, "Error") || strings.HasSuffix(name, "Exception")) {
		return false
	}
	for i, c := range name {
		switch {
		case c == '_', c == '.' && i > 0, c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// Shim status codes (checked against package shim at compile time in the cgo
// build).
const (
	statusOK    = 0
	statusError = 1
	statusOOM   = 2
)
