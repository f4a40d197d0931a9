#pragma once
/* c10's generated CUDA build macros (absent from a CPU libtorch). */
