package engine

import (
	"fmt"
	"path/filepath"
)

// EnvOpLibraries names the environment variable listing shared libraries of
// TorchScript custom ops, separated by the OS path list separator (':' on
// Linux), that the engine loads before every checkpoint, besides those
// LoadOptions.OpLibraries names (a manifest's op_libraries). An entry
// without a '/' is found as dlopen finds a library name (LD_LIBRARY_PATH,
// the linker's cache, the default folders); empty entries are ignored.
const EnvOpLibraries = "WORLDFOUNDRY_TORCH_OP_LIBRARIES"

// UnknownOpError means a checkpoint calls a TorchScript custom op that no
// op library loaded in the process registers (libtorch's "Unknown builtin
// op: NS::NAME"). Its message is one line that names the op and the fix;
// the interpreter's report, with its TorchScript traceback, is Traceback.
//
//	var uo *engine.UnknownOpError
//	if errors.As(err, &uo) {
//		log.Print(uo.Traceback)
//	}
type UnknownOpError struct {
	// Namespace is the op's namespace ("torchvision").
	Namespace string
	// Name is the op's name in its namespace ("nms").
	Name string
	// Traceback is libtorch's whole report: the message and the
	// TorchScript code that calls the op.
	Traceback string
}

// Op returns the op's qualified name, "NAMESPACE::NAME".
func (e *UnknownOpError) Op() string { return e.Namespace + "::" + e.Name }

// Error names the op, its namespace and how to load the library that
// registers it.
func (e *UnknownOpError) Error() string {
	msg := fmt.Sprintf("unknown TorchScript op %s: the checkpoint calls an op of namespace %q, which no loaded op library registers; "+
		"name the shared library that registers it in the manifest's op_libraries (family or variant) or in %s",
		e.Op(), e.Namespace, EnvOpLibraries)
	if hint := OpLibraryHint(e.Namespace); hint != "" {
		msg += " (" + hint + ")"
	}
	return msg
}

// knownOpLibraries are the op libraries a distribution installs, by the
// namespace of the ops they register: a glob of where the library is.
var knownOpLibraries = map[string]struct{ pkg, glob string }{
	// python3-torchvision's extension module registers torchvision::nms,
	// roi_align, deform_conv2d, ... (its ops need no Python).
	"torchvision": {"python3-torchvision", "/usr/lib/python3/dist-packages/torchvision/_C.cpython-*.so"},
}

// KnownOpLibrary returns the op library that a Debian package installs
// for the ops of namespace (python3-torchvision's for "torchvision"), when
// it is installed on this machine: its path (the first, by name, when
// several Python versions have one).
func KnownOpLibrary(namespace string) (string, bool) {
	k, ok := knownOpLibraries[namespace]
	if !ok {
		return "", false
	}
	found, _ := filepath.Glob(k.glob)
	if len(found) == 0 {
		return "", false
	}
	return found[0], true
}

// OpLibraryHint says where the op library of a namespace is on Debian,
// for the namespaces whose library a Debian package installs: its path
// when it is installed (KnownOpLibrary: "Debian's python3-torchvision
// installs it as /usr/lib/python3/dist-packages/torchvision/_C.cpython-311-x86_64-linux-gnu.so"),
// else the package to install. It returns "" for other namespaces.
func OpLibraryHint(namespace string) string {
	k, ok := knownOpLibraries[namespace]
	if !ok {
		return ""
	}
	if path, ok := KnownOpLibrary(namespace); ok {
		return fmt.Sprintf("Debian's %s installs it as %s", k.pkg, path)
	}
	return fmt.Sprintf("on Debian, apt-get install %s, which installs it as %s", k.pkg, k.glob)
}
