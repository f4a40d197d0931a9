#pragma once
#include "cuda_runtime_api.h"
typedef enum { CUSPARSE_STATUS_SUCCESS = 0 } cusparseStatus_t;
typedef struct cusparseContext* cusparseHandle_t;
#ifdef __cplusplus
extern "C" {
#endif
const char* cusparseGetErrorString(cusparseStatus_t);
#ifdef __cplusplus
}
#endif
