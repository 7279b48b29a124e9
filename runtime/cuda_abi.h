/*
 * cuda_abi.h — the CUDA driver's types that disc passes by address,
 * declared again (as cudrv.c declares its handles) so that the runtime
 * archive builds without the toolkit; tests/gpu/cublaslt_abi.c checks
 * them against the toolkit's cuda.h where it is.
 */
#ifndef DISC_CUDA_ABI_H
#define DISC_CUDA_ABI_H

#include <stddef.h>

enum { CU_MEMORY_DEVICE = 2 }; /* CUmemorytype's CU_MEMORYTYPE_DEVICE */

/* CUDA_MEMCPY2D (v2), what cuMemcpy2DAsync copies: Height rows of
 * WidthInBytes, each side at its own pitch. */
typedef struct CuMemcpy2D {
    size_t srcXInBytes, srcY;
    int srcMemoryType;
    const void *srcHost;
    unsigned long long srcDevice;
    void *srcArray;
    size_t srcPitch;
    size_t dstXInBytes, dstY;
    int dstMemoryType;
    void *dstHost;
    unsigned long long dstDevice;
    void *dstArray;
    size_t dstPitch;
    size_t WidthInBytes, Height;
} CuMemcpy2D;

#endif
