#!/usr/bin/env bash
# Writes a pkg-config file for a libtorch installation to stdout, whose flags
# builds with -tags libtorch_custom take through CGO_CXXFLAGS and CGO_LDFLAGS
# (docs/engine.md, "Finding libtorch"):
#
#   scripts/libtorch-pc.sh /opt/libtorch > ~/.local/lib/pkgconfig/libtorch.pc
#   export PKG_CONFIG_PATH=~/.local/lib/pkgconfig
#   go env -w CGO_CXXFLAGS="$(pkg-config --cflags libtorch)" CGO_LDFLAGS="$(pkg-config --libs libtorch)"
#   go build -tags libtorch_custom ./...
#
# DIR is an unpacked pytorch.org zip (DIR/include, DIR/lib) or a system
# prefix such as /usr (headers in DIR/include, libraries in DIR/lib or
# DIR/lib/<multiarch>). The file gets:
#   Cflags  -I for libtorch's include directory and its C++ API headers
#           (include/torch/csrc/api/include), and -D_GLIBCXX_USE_CXX11_ABI=0
#           for a pre-cxx11-ABI build (from TorchConfig.cmake, else from the
#           library's symbols);
#   Libs    -L and an rpath to the library directory, so programs find
#           libtorch at run time without LD_LIBRARY_PATH, and libtorch,
#           libtorch_cpu and libc10 (plus libtorch_cuda and libc10_cuda when
#           the build has them) linked with --no-as-needed, which keeps the
#           libraries whose only job is registering operators and devices.
set -euo pipefail

die() { echo "libtorch-pc: $*" >&2; exit 1; }

[ $# -eq 1 ] || die "usage: $0 LIBTORCH_DIR > libtorch.pc"
dir=$(cd "$1" 2>/dev/null && pwd) || die "$1: no such directory"
case "$dir" in *[[:space:]]*) die "$dir: pkg-config cannot handle spaces in paths; move or link libtorch elsewhere" ;; esac

inc=$dir/include
api=$inc/torch/csrc/api/include
[ -f "$inc/torch/script.h" ] || die "$inc/torch/script.h not found: $dir is not a libtorch directory (want include/ and lib/ as in a pytorch.org zip)"
[ -f "$api/torch/all.h" ] || die "$api/torch/all.h not found: libtorch's C++ API headers are missing"

libdir=
multiarch=$(gcc -print-multiarch 2>/dev/null || true)
for d in "$dir/lib" ${multiarch:+"$dir/lib/$multiarch"} "$dir/lib64"; do
  if [ -e "$d/libtorch.so" ]; then libdir=$d; break; fi
done
[ -n "$libdir" ] || die "libtorch.so not found in $dir/lib${multiarch:+, $dir/lib/$multiarch} or $dir/lib64"

version_h=$api/torch/version.h
version=$(awk '/#define TORCH_VERSION_(MAJOR|MINOR|PATCH)/ { v = v (v == "" ? "" : ".") $3 } END { print v }' "$version_h")
[ -n "$version" ] || die "$version_h has no TORCH_VERSION_MAJOR/MINOR/PATCH"

# The C++ ABI libtorch was built with: TorchConfig.cmake says it, else the
# library's std::string symbols (std::__cxx11::basic_string is the new ABI).
abi=
for cfg in "$dir/share/cmake/Torch/TorchConfig.cmake" "$libdir/cmake/Torch/TorchConfig.cmake"; do
  if [ -f "$cfg" ]; then
    abi=$(sed -n 's/.*_GLIBCXX_USE_CXX11_ABI=\([01]\).*/\1/p' "$cfg" | head -1)
    [ -n "$abi" ] && break
  fi
done
if [ -z "$abi" ]; then
  command -v nm >/dev/null 2>&1 || die "cannot tell libtorch's C++ ABI: no TorchConfig.cmake and no nm (binutils)"
  cxx11=$(nm -D --defined-only "$libdir/libc10.so" | grep -c '__cxx11' || true)
  if [ "$cxx11" -gt 0 ]; then abi=1; else abi=0; fi
fi
abiflag=
[ "$abi" = 0 ] && abiflag=" -D_GLIBCXX_USE_CXX11_ABI=0"

libs="-ltorch -ltorch_cpu -lc10"
if [ -e "$libdir/libtorch_cuda.so" ]; then
  libs="$libs -ltorch_cuda"
  [ -e "$libdir/libc10_cuda.so" ] && libs="$libs -lc10_cuda"
fi

cat <<EOF
# libtorch $version at $dir, written by scripts/libtorch-pc.sh
prefix=$dir
includedir=\${prefix}/include
libdir=$libdir

Name: libtorch
Description: PyTorch's C++ library (libtorch), for wfgen's engine built with -tags libtorch_custom
Version: $version
Cflags: -I\${includedir} -I\${includedir}/torch/csrc/api/include$abiflag
Libs: -L\${libdir} -Wl,-rpath,\${libdir} -Wl,--no-as-needed $libs -Wl,--as-needed
EOF
