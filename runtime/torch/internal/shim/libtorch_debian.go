//go:build !libtorch_custom

package shim

// Debian's libtorch-dev (bookworm: 1.13, trixie: 2.6) puts libtorch's headers
// under /usr/include, which the compiler searches anyway, except the C++
// API's, and its libraries in the linker's default path. libtorch_cpu and
// libc10 are linked even when nothing refers to them directly (--no-as-needed)
// so that their operator registrations run.

// #cgo CXXFLAGS: -I/usr/include/torch/csrc/api/include
// #cgo LDFLAGS: -Wl,--no-as-needed -ltorch -ltorch_cpu -lc10 -Wl,--as-needed
import "C"
