//go:build !libtorch_custom

package shim

// Debian's libtorch-dev (bookworm: 1.13, trixie: 2.6) puts libtorch's headers
// under /usr/include, which the compiler searches anyway, except the C++
// API's, and its libraries in the linker's default path. libtorch_cpu and
// libc10 are linked even when nothing refers to them directly (--no-as-needed)
// so that their operator registrations run.
//
// Built with -tags libtorch_custom, this file is left out and the flags come
// from CGO_CXXFLAGS and CGO_LDFLAGS alone (docs/engine.md, "Finding
// libtorch"), which Go's build cache keys on (pkg-config output it does not:
// go.dev/issue/24544, so a #cgo pkg-config line would keep a shim built
// against another libtorch).

// #cgo CXXFLAGS: -I/usr/include/torch/csrc/api/include
// #cgo LDFLAGS: -Wl,--no-as-needed -ltorch -ltorch_cpu -lc10 -Wl,--as-needed
import "C"
