package tensor

// DType names a tensor element type across the engine boundary.
type DType string

// Tensor element types the engine boundary supports.
const (
	Float32  DType = "float32"
	Float16  DType = "float16"
	BFloat16 DType = "bfloat16"
	Int64    DType = "int64"
	Int32    DType = "int32"
	Uint8    DType = "uint8"
	Bool     DType = "bool"
)

// Size returns the element size in bytes, or 0 for an unknown dtype.
func (d DType) Size() int {
	switch d {
	case Float32, Int32:
		return 4
	case Float16, BFloat16:
		return 2
	case Int64:
		return 8
	case Uint8, Bool:
		return 1
	}
	return 0
}

// IsFloating reports whether d is a floating-point type.
func (d DType) IsFloating() bool { return d == Float32 || d == Float16 || d == BFloat16 }

// DTypes lists the tensor element types a manifest may declare, in
// documentation order.
var DTypes = []DType{Float32, Float16, BFloat16, Int64, Int32, Uint8, Bool}

// Valid reports whether d is one of DTypes.
func (d DType) Valid() bool { return d.Size() > 0 }
