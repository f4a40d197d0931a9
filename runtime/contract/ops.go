package contract

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// MaxCodeTotalBytes bounds the code ReadCustomOps reads from one archive,
// all its code files together.
const MaxCodeTotalBytes = 64 << 20

// CustomOp is a TorchScript op an archive's code calls whose namespace
// libtorch does not register itself: an op library must be loaded for
// the archive to load (a manifest's op_libraries).
type CustomOp struct {
	// Namespace is the op's namespace ("torchvision").
	Namespace string
	// Name is the op's name in its namespace ("nms").
	Name string
}

// String returns "NAMESPACE::NAME", as libtorch names the op.
func (o CustomOp) String() string { return o.Namespace + "::" + o.Name }

// builtinOpNamespaces are the op namespaces libtorch (1.13 through 2.6)
// registers itself, in C++: code calling their ops needs no op library.
var builtinOpNamespaces = map[string]bool{
	"aten": true, "prim": true, "prims": true, "nvprims": true, "quantized": true, "_quantized": true,
	"quantization": true, "quantized_decomposed": true, "_caffe2": true, "c10d": true, "_c10d_functional": true,
	"_c10d_functional_autograd": true, "c10d_functional": true, "_dtensor": true, "profiler": true,
	"prepacked": true, "mkldnn": true, "mkldnn_prepacked": true, "onednn": true, "mkl": true, "xnnpack": true,
	"static_runtime": true, "sparse": true, "_test": true, "cuda": true, "cudnn": true, "fbgemm": true,
	"inductor": true, "_inductor": true, "higher_order": true, "rngprims": true, "debugprims": true,
	"onnx": true, "_nested": true, "_export": true, "_higher_order_ops": true, "_TorchScriptTesting": true,
	"mps": true, "xpu": true, "_mps": true, "_xpu": true, "_fbgemm": true, "_sparse": true, "_fused": true,
}

// ReadCustomOps reads a TorchScript archive (see ReadReturns) and returns
// the custom ops its code calls — ops.NAMESPACE.NAME(...) in serialized
// code, whatever module or function calls them, for every namespace but
// those libtorch registers itself (aten, prim, quantized, ...) — sorted
// and without repeats. Loading the archive needs the op library that
// registers each (torchvision's for torchvision::nms). Code files are
// read up to MaxCodeBytes each and MaxCodeTotalBytes together; an archive
// it cannot read, or one past those limits, is an error.
func ReadCustomOps(r io.ReaderAt, size int64) ([]CustomOp, error) {
	a, err := openArchive(r, size)
	if err != nil {
		return nil, err
	}
	prefix := a.dir + "code/"
	var total uint64
	seen := map[CustomOp]bool{}
	var ops []CustomOp
	for _, f := range a.zr.File {
		if !strings.HasPrefix(f.Name, prefix) || !strings.HasSuffix(f.Name, ".py") {
			continue
		}
		if total += f.UncompressedSize64; total > MaxCodeTotalBytes {
			return nil, fmt.Errorf("the archive's code is more than the %d bytes this reader reads", MaxCodeTotalBytes)
		}
		code, err := readEntry(f)
		if err != nil {
			return nil, err
		}
		for _, t := range lex(string(code), false) {
			if t.kind != 'i' {
				continue
			}
			name := strings.TrimPrefix(t.text, "torch.")
			parts := strings.Split(name, ".")
			if len(parts) != 3 || parts[0] != "ops" || builtinOpNamespaces[parts[1]] || !isIdentifier(parts[1]) || !isIdentifier(parts[2]) {
				continue
			}
			op := CustomOp{Namespace: parts[1], Name: parts[2]}
			if !seen[op] {
				seen[op] = true
				ops = append(ops, op)
			}
		}
	}
	slices.SortFunc(ops, func(x, y CustomOp) int { return strings.Compare(x.String(), y.String()) })
	return ops, nil
}
