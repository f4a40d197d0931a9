#pragma once
#include "cuda_runtime_api.h"
typedef enum { CUBLAS_STATUS_SUCCESS = 0 } cublasStatus_t;
typedef struct cublasContext* cublasHandle_t;
#ifdef __cplusplus
extern "C" {
#endif
const char* cublasGetStatusString(cublasStatus_t);
#ifdef __cplusplus
}
#endif
