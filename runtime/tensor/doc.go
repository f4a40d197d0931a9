// Package tensor holds the values models take and give: Tensor, a host
// tensor (a dtype, a shape, row-major little-endian bytes) that crosses
// the engine boundary as it is; its DTypes; the typed artifacts a task's
// outputs become (Video, Image, Embedding) and their As* conversions;
// Stack and Unstack, which make a batch of items and split it; and
// OutputBuffer, reused memory for a call's outputs. It depends on no
// engine: tensors are built and read without libtorch.
package tensor
