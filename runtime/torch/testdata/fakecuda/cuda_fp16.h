#pragma once
/* For type-checking only (see cuda_runtime_api.h). */
struct __half { unsigned short x; };
