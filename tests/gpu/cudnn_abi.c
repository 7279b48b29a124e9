/*
 * cudnn_abi.c — runtime/cudnn_abi.h against the CUDA toolkit's own cudnn.h
 * (unit/test_cudnn_abi, built where the toolkit's headers are): every
 * constant disc passes to cuDNN and the layout of the forward algorithm's
 * ranking, which disc declares again so that the runtime archive builds
 * without the toolkit. cudnn.h marks this legacy API deprecated; the
 * target is built with -Wno-deprecated-declarations.
 */
#include "runtime/cudnn_abi.h"
#include "../unit/check.h"

#include <cudnn.h>
#include <stddef.h>

#define SAME(ours, theirs) CHECK_MSG((long long)(ours) == (long long)(theirs), "%s is %lld, cudnn.h's %s %lld", \
                                     #ours, (long long)(ours), #theirs, (long long)(theirs))

int main(void)
{
    SAME(DNN_SUCCESS, CUDNN_STATUS_SUCCESS);
    SAME(DNN_FLOAT, CUDNN_DATA_FLOAT);
    SAME(DNN_DOUBLE, CUDNN_DATA_DOUBLE);
    SAME(DNN_HALF, CUDNN_DATA_HALF);
    SAME(DNN_BFLOAT16, CUDNN_DATA_BFLOAT16);
    SAME(DNN_NCHW, CUDNN_TENSOR_NCHW);
    SAME(DNN_CROSS_CORRELATION, CUDNN_CROSS_CORRELATION);
    SAME(DNN_DEFAULT_MATH, CUDNN_DEFAULT_MATH);
    SAME(DNN_TENSOR_OP_MATH, CUDNN_TENSOR_OP_MATH);
    SAME(DNN_FMA_MATH, CUDNN_FMA_MATH);
    SAME(DNN_ACT_RELU, CUDNN_ACTIVATION_RELU);
    SAME(DNN_ACT_IDENTITY, CUDNN_ACTIVATION_IDENTITY);
    SAME(DNN_PROPAGATE_NAN, CUDNN_PROPAGATE_NAN);
    SAME(DNN_FWD_IMPLICIT_PRECOMP_GEMM, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM);
    SAME(DNN_POOL_MAX, CUDNN_POOLING_MAX);
    SAME(DNN_POOL_AVG_INCLUDE_PAD, CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING);
    SAME(DNN_POOL_AVG_EXCLUDE_PAD, CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING);
    /* the enums disc passes as int, and the handles as pointers */
    SAME(sizeof(DnnStatus), sizeof(cudnnStatus_t));
    SAME(sizeof(int), sizeof(cudnnDataType_t));
    SAME(sizeof(int), sizeof(cudnnTensorFormat_t));
    SAME(sizeof(int), sizeof(cudnnConvolutionMode_t));
    SAME(sizeof(int), sizeof(cudnnMathType_t));
    SAME(sizeof(int), sizeof(cudnnActivationMode_t));
    SAME(sizeof(int), sizeof(cudnnNanPropagation_t));
    SAME(sizeof(int), sizeof(cudnnConvolutionFwdAlgo_t));
    SAME(sizeof(int), sizeof(cudnnPoolingMode_t));
    SAME(sizeof(DnnHandle), sizeof(cudnnHandle_t));
    SAME(sizeof(DnnTensor), sizeof(cudnnTensorDescriptor_t));
    SAME(sizeof(DnnFilter), sizeof(cudnnFilterDescriptor_t));
    SAME(sizeof(DnnConv), sizeof(cudnnConvolutionDescriptor_t));
    SAME(sizeof(DnnAct), sizeof(cudnnActivationDescriptor_t));
    SAME(sizeof(DnnPool), sizeof(cudnnPoolingDescriptor_t));
    SAME(sizeof(DnnFwdPerf), sizeof(cudnnConvolutionFwdAlgoPerf_t));
#define FIELD(f) SAME(offsetof(DnnFwdPerf, f), offsetof(cudnnConvolutionFwdAlgoPerf_t, f))
    FIELD(algo); FIELD(status); FIELD(time); FIELD(memory); FIELD(determinism); FIELD(mathType); FIELD(reserved);
#undef FIELD
    /* the backward-data ranking, read into the same struct */
    SAME(sizeof(DnnFwdPerf), sizeof(cudnnConvolutionBwdDataAlgoPerf_t));
    SAME(sizeof(int), sizeof(cudnnConvolutionBwdDataAlgo_t));
#define FIELD(f) SAME(offsetof(DnnFwdPerf, f), offsetof(cudnnConvolutionBwdDataAlgoPerf_t, f))
    FIELD(algo); FIELD(status); FIELD(time); FIELD(memory); FIELD(determinism); FIELD(mathType); FIELD(reserved);
#undef FIELD
    return check_done();
}
