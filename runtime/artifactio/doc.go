// Package artifactio writes the runtime's typed artifacts to files: a video as
// an animated GIF or a folder of PNG frames, an image as PNG, an embedding or
// tensor as JSON or a NumPy .npy file, and a cheap preview (the first frame of
// a video) for artifacts whose spec asks for one.
//
// Every writer is deterministic (the same artifact gives the same bytes) and
// atomic: the output is written to a temporary file (or folder) next to the
// destination and renamed into place, so a failure leaves nothing
// half-written. The package uses the standard library only and builds with
// CGO_ENABLED=0.
//
// It also holds the float16 and bfloat16 conversions the runtime needs for
// half-precision tensors (Float16ToFloat32, Float32ToBFloat16, FloatValues, ...)
// and a reader for .npy files (DecodeNPY, ReadNPY).
package artifactio
