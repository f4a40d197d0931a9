#pragma once
/* For type-checking only (see cuda_runtime_api.h). */
#include "cublas_v2.h"
typedef struct cublasLtContext* cublasLtHandle_t;
