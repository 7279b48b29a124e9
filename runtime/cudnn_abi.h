/*
 * cudnn_abi.h — cudnn.h's types and constants, as much as runtime/cudnn.c
 * calls (cuDNN 8 and 9's legacy convolution API), declared again so that
 * the runtime archive builds where the CUDA toolkit is absent.
 * unit/test_cudnn_abi checks every one against the toolkit's own headers
 * where they are installed.
 */
#ifndef DISC_CUDNN_ABI_H
#define DISC_CUDNN_ABI_H

#include <stddef.h>

typedef int DnnStatus; /* cudnnStatus_t: CUDNN_STATUS_SUCCESS 0 */
typedef struct DnnHandle *DnnHandle;
typedef struct DnnTensor *DnnTensor;     /* cudnnTensorDescriptor_t */
typedef struct DnnFilter *DnnFilter;     /* cudnnFilterDescriptor_t */
typedef struct DnnConv *DnnConv;         /* cudnnConvolutionDescriptor_t */
typedef struct DnnAct *DnnAct;           /* cudnnActivationDescriptor_t */
typedef struct DnnPool *DnnPool;         /* cudnnPoolingDescriptor_t */
typedef struct {
    int algo;                            /* cudnnConvolutionFwdAlgo_t */
    DnnStatus status;
    float time;
    size_t memory;
    int determinism;
    int mathType;
    int reserved[3];
} DnnFwdPerf;                            /* cudnnConvolutionFwdAlgoPerf_t, and ..BwdData.. (the same layout) */

enum {
    DNN_SUCCESS = 0,
    DNN_FLOAT = 0, DNN_DOUBLE = 1, DNN_HALF = 2, DNN_BFLOAT16 = 9, /* cudnnDataType_t */
    DNN_NCHW = 0,                                                  /* cudnnTensorFormat_t */
    DNN_CROSS_CORRELATION = 1,                                     /* cudnnConvolutionMode_t */
    DNN_DEFAULT_MATH = 0, DNN_TENSOR_OP_MATH = 1, DNN_FMA_MATH = 3, /* cudnnMathType_t */
    DNN_ACT_RELU = 1, DNN_ACT_IDENTITY = 5,                        /* cudnnActivationMode_t */
    DNN_PROPAGATE_NAN = 1,                                         /* cudnnNanPropagation_t */
    DNN_FWD_IMPLICIT_PRECOMP_GEMM = 1,                             /* cudnnConvolutionFwdAlgo_t */
    DNN_POOL_MAX = 0, DNN_POOL_AVG_INCLUDE_PAD = 1,                /* cudnnPoolingMode_t */
    DNN_POOL_AVG_EXCLUDE_PAD = 2,
};

#endif
