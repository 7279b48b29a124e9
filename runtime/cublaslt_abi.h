/*
 * cublaslt_abi.h — cublasLt.h's types and constants, as much as
 * runtime/cublaslt.c calls, declared again so that the runtime archive
 * builds where the CUDA toolkit is absent. unit/test_cublaslt_abi checks
 * every one against the toolkit's own header where it is installed.
 */
#ifndef DISC_CUBLASLT_ABI_H
#define DISC_CUBLASLT_ABI_H

#include <stddef.h>
#include <stdint.h>

typedef int LtStatus; /* cublasStatus_t: CUBLAS_STATUS_SUCCESS 0 */
typedef struct LtHandle *LtHandle;
typedef struct LtDesc *LtDesc;
typedef struct LtLayout *LtLayout;
typedef struct LtPref *LtPref;
typedef struct {
    uint64_t data[8];
} LtAlgo; /* cublasLtMatmulAlgo_t */
typedef struct {
    LtAlgo algo;
    size_t workspaceSize;
    LtStatus state;
    float wavesCount;
    int reserved[4];
} LtHeuristic; /* cublasLtMatmulHeuristicResult_t */

enum {
    R_32F = 0, R_64F = 1, R_16F = 2, R_16BF = 14,                  /* cudaDataType */
    COMPUTE_32F = 68, COMPUTE_32F_FAST_TF32 = 77, COMPUTE_64F = 70, /* cublasComputeType_t */
    OP_N = 0, OP_T = 1,                                             /* cublasOperation_t */
    DESC_TRANSA = 3, DESC_TRANSB = 4, DESC_EPILOGUE = 7, DESC_BIAS_POINTER = 8,
    LAYOUT_BATCH_COUNT = 5, LAYOUT_STRIDED_BATCH_OFFSET = 6,
    PREF_MAX_WORKSPACE_BYTES = 1, PREF_MIN_ALIGNMENT_A = 5, PREF_MIN_ALIGNMENT_B = 6,
    PREF_MIN_ALIGNMENT_C = 7, PREF_MIN_ALIGNMENT_D = 8,
    EPI_DEFAULT = 1, EPI_RELU = 2, EPI_BIAS = 4, EPI_RELU_BIAS = 6, EPI_GELU = 32, EPI_GELU_BIAS = 36,
};
/* cuBLAS (cublas_api.h): the fallback where cuBLASLt has no algorithm */
typedef struct BlasHandle *BlasHandle; /* cublasHandle_t */
enum {
    BLAS_STATUS_NOT_SUPPORTED = 15,      /* cublasStatus_t (cuBLASLt's too) */
    BLAS_GEMM_DEFAULT = -1,              /* cublasGemmAlgo_t */
};

#endif
