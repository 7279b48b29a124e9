/*
 * cublaslt_abi.c — runtime/cublaslt_abi.h against the CUDA toolkit's own
 * cublasLt.h (unit/test_cublaslt_abi, built where the toolkit's headers
 * are): every constant disc passes to cuBLASLt and the layout of the
 * heuristic's result, which disc declares again so that the runtime
 * archive builds without the toolkit; and runtime/cuda_abi.h's driver
 * struct against cuda.h's.
 */
#include "runtime/cublaslt_abi.h"
#include "runtime/cuda_abi.h"
#include "../unit/check.h"

#include <cublasLt.h>
#include <cuda.h>
#include <stddef.h>

#define SAME(ours, theirs) CHECK_MSG((long long)(ours) == (long long)(theirs), "%s is %lld, cublasLt.h's %s %lld", \
                                     #ours, (long long)(ours), #theirs, (long long)(theirs))

int main(void)
{
    SAME(CU_MEMORY_DEVICE, CU_MEMORYTYPE_DEVICE);
    SAME(sizeof(CuMemcpy2D), sizeof(CUDA_MEMCPY2D));
#define FIELD(f) SAME(offsetof(CuMemcpy2D, f), offsetof(CUDA_MEMCPY2D, f))
    FIELD(srcXInBytes); FIELD(srcY); FIELD(srcMemoryType); FIELD(srcHost); FIELD(srcDevice); FIELD(srcArray);
    FIELD(srcPitch); FIELD(dstXInBytes); FIELD(dstY); FIELD(dstMemoryType); FIELD(dstHost); FIELD(dstDevice);
    FIELD(dstArray); FIELD(dstPitch); FIELD(WidthInBytes); FIELD(Height);
#undef FIELD
    SAME(R_32F, CUDA_R_32F);
    SAME(R_64F, CUDA_R_64F);
    SAME(R_16F, CUDA_R_16F);
    SAME(R_16BF, CUDA_R_16BF);
    SAME(COMPUTE_32F, CUBLAS_COMPUTE_32F);
    SAME(COMPUTE_32F_FAST_TF32, CUBLAS_COMPUTE_32F_FAST_TF32);
    SAME(COMPUTE_64F, CUBLAS_COMPUTE_64F);
    SAME(OP_N, CUBLAS_OP_N);
    SAME(OP_T, CUBLAS_OP_T);
    SAME(DESC_TRANSA, CUBLASLT_MATMUL_DESC_TRANSA);
    SAME(DESC_TRANSB, CUBLASLT_MATMUL_DESC_TRANSB);
    SAME(DESC_EPILOGUE, CUBLASLT_MATMUL_DESC_EPILOGUE);
    SAME(DESC_BIAS_POINTER, CUBLASLT_MATMUL_DESC_BIAS_POINTER);
    SAME(LAYOUT_BATCH_COUNT, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT);
    SAME(LAYOUT_STRIDED_BATCH_OFFSET, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET);
    SAME(PREF_MAX_WORKSPACE_BYTES, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES);
    SAME(PREF_MIN_ALIGNMENT_A, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES);
    SAME(PREF_MIN_ALIGNMENT_B, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES);
    SAME(PREF_MIN_ALIGNMENT_C, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES);
    SAME(PREF_MIN_ALIGNMENT_D, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES);
    SAME(EPI_DEFAULT, CUBLASLT_EPILOGUE_DEFAULT);
    SAME(EPI_RELU, CUBLASLT_EPILOGUE_RELU);
    SAME(EPI_BIAS, CUBLASLT_EPILOGUE_BIAS);
    SAME(EPI_RELU_BIAS, CUBLASLT_EPILOGUE_RELU_BIAS);
    SAME(EPI_GELU, CUBLASLT_EPILOGUE_GELU);
    SAME(EPI_GELU_BIAS, CUBLASLT_EPILOGUE_GELU_BIAS);
    SAME(sizeof(LtAlgo), sizeof(cublasLtMatmulAlgo_t));
    SAME(sizeof(LtHeuristic), sizeof(cublasLtMatmulHeuristicResult_t));
    SAME(offsetof(LtHeuristic, workspaceSize), offsetof(cublasLtMatmulHeuristicResult_t, workspaceSize));
    SAME(offsetof(LtHeuristic, state), offsetof(cublasLtMatmulHeuristicResult_t, state));
    SAME(sizeof(int32_t), sizeof(cublasOperation_t)); /* TRANSA/B's value */
    SAME(sizeof(uint32_t), sizeof(cublasLtEpilogue_t));
    SAME(sizeof(LtStatus), sizeof(cublasStatus_t));
    return check_done();
}
