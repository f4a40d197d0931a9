//go:build libtorch_custom

package shim

// With the build tag libtorch_custom the Debian paths are dropped and the
// flags come from `pkg-config libtorch`: a libtorch.pc found through
// PKG_CONFIG_PATH, such as the one scripts/libtorch-pc.sh writes for an
// unpacked pytorch.org zip (include paths, ABI define, libraries, rpath).

// #cgo pkg-config: libtorch
import "C"
