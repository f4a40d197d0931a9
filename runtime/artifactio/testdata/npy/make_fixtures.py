# Regenerates the .npy fixtures with NumPy (run with Debian's /usr/bin/python3
# from this folder). npy_test.go builds the same arrays in Go and checks that
# EncodeNPY writes exactly these bytes.
import numpy as np

arrays = {
    "f4_2x3": np.arange(6, dtype=np.float32).reshape(2, 3) * np.float32(0.5) - np.float32(1),
    "f2_5": (np.arange(5, dtype=np.float32) * np.float32(0.1)).astype(np.float16),
    "i8_3": np.array([-3, 0, 1 << 40], dtype=np.int64),
    "i4_2x3x4": np.arange(24, dtype=np.int32).reshape(2, 3, 4) - np.int32(12),
    "u1_3x4": np.arange(12, dtype=np.uint8).reshape(3, 4) * np.uint8(20),
    "b1_3": np.array([True, False, True]),
    "f4_scalar": np.array(2.5, dtype=np.float32),
    "f4_0x4": np.zeros((0, 4), dtype=np.float32),
    "u1_1000": (np.arange(1000) % 251).astype(np.uint8),
}
for name, a in arrays.items():
    np.save(name + ".npy", a)
