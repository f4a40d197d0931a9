#pragma once
/* For type-checking only (see cuda_runtime_api.h). */
struct __nv_bfloat16 { unsigned short x; };
