// Package pixels converts pictures into the tensors that image and video
// fields declare, and image and video artifacts' tensors back into pictures,
// as a manifest's tensor contract (dtype, shape, image spec) says. It is pure
// Go.
//
// # Picture to tensor (Tensor, VideoTensor)
//
// The target dtype is the field's dtype; without one it is uint8 when the
// image spec sets no range, mean or std, else float32. Floating dtypes
// (float32, float16, bfloat16) take every conversion below; integer dtypes
// (uint8, int32, int64) take the 8-bit values as they are, so their spec may
// not set mean/std or a range other than [0, 255]. bool is refused.
//
// A picture (any image.Image) is read as 8-bit non-premultiplied RGBA
// (color.NRGBAModel; *image.Gray, *image.RGBA and *image.NRGBA are read
// directly), then put in the spec's channel order:
//
//   - RGB: red, green, blue (alpha dropped, not composited);
//   - BGR: blue, green, red;
//   - RGBA: red, green, blue, alpha (255 for an opaque picture);
//   - L: luma, (19595 R + 38470 G + 7471 B + 32768) >> 16 on the 8-bit
//     values — ITU-R 601-2 in the fixed point PIL's convert("L") uses. Go's
//     color.GrayModel has the same weights but works on 16-bit values and
//     gives one level more for about a sixth of all colours, so it is not
//     used. A grey picture's luma is its grey value.
//
// The layout is HWC or CHW. A floating value is computed in float32 exactly
// as torchvision's ToTensor and Normalize compute it: v/255, then, when the
// range [lo, hi] is not [0, 1], v*(hi-lo) + lo (hi-lo taken in float32), then
// (v - mean[c]) / std[c] with mean and std rounded to float32 first.
// float16 and bfloat16 round that float32 to nearest even, as torch's
// .half() and .bfloat16() do. For a PNG with 8-bit channels the result is
// bit-identical to PIL's Image.open(path).convert(mode) followed by those
// torchvision transforms (the package's tests check it against Debian's
// python3-torchvision). JPEG decoders differ between Go and PIL, so a JPEG's
// pixels may differ by a level or two before any conversion; a 16-bit PNG is
// read at 8 bits (the high byte).
//
// Nothing is resized: the picture's height, width and channel count (and a
// video's frame count) must match the fixed sizes of the field's shape, and a
// name repeated in it ([1, H, H]) must take one size; otherwise the error
// names the field. A field's shape has the picture's rank (3 for an image, 4
// for a video) or, for a stacked input of a task whose batching names its
// dimension, one more: the leading batch dimension, which one picture does
// not have — the tensor is one item's.
//
// # Tensor to picture (Artifact)
//
// Artifact undoes the conversion an image or video artifact declares:
// v*std[c] + mean[c], then (v - lo) / (hi - lo) * 255 rounded to the nearest
// integer and clamped to 0..255 (torchvision's ToPILImage truncates instead;
// rounding makes Tensor followed by Artifact give back the picture). It
// returns uint8 [H, W, C] (a video [T, H, W, C]) with C = 1 for L, 3 for RGB
// and BGR (returned as RGB) and 4 for RGBA, which tensor.AsImage and
// tensor.AsVideo take. Without an image spec an artifact's tensor is read as
// HWC with 1, 3 or 4 channels (grey, RGB, RGBA).
package pixels
