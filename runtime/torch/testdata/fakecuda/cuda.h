#pragma once
#include "cuda_runtime_api.h"
typedef enum cudaError_enum { CUDA_SUCCESS = 0 } CUresult;
#define CU_EVENT_DEFAULT 0
#define CU_EVENT_DISABLE_TIMING 2
