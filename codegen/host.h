/*
 * host.h — inside the host-flow emitter (host.c, hostlib.c) and the
 * targets' hooks (cpu.c, exec.c, aot.c): the state of the one function
 * being emitted and the helpers they share.
 */
#ifndef DISC_HOST_H
#define DISC_HOST_H

#include "codegen/codegen.h"

typedef struct Host {
    Cg *cg;
    LLVMValueRef block; /* the memory plan's one block for this run */
    LLVMValueRef *slot_off; /* by slot of the plan: its offset in block, this run's */
    LLVMValueRef rt, io, shapes, syms;
    LLVMValueRef *vbuf; /* by value id: i8*, its data on the host */
    LLVMValueRef *dbuf; /* by value id: its copy in device memory, on a
                           target whose kernels run on a device
                           (CgTarget.dev_memory; else unused) */
    LLVMValueRef *raw;  /* by value id, with dev_memory: a graph input's
                           pointer as the caller gave it, on the host or
                           the device (disc_rt_dev_io) */
    int *nuse;          /* by value id: uses by ops and graph outputs (hostlib.c) */
    LLVMValueRef dev_rc; /* the last disc_rt_dev_matmul's status (hostlib.c) */
    bool *bound;        /* by symbol id: a DATA symbol a host op emitted so far binds */
    LLVMBasicBlockRef fail; /* a block that returns -1 from fail_fn, once made */
    LLVMValueRef fail_fn;
} Host;

LLVMValueRef host_fn_decl(Cg *cg, const char *name, LLVMTypeRef ret, LLVMTypeRef *params, int n,
                          LLVMTypeRef *fty);
LLVMValueRef host_gep(Cg *cg, LLVMTypeRef t, LLVMValueRef base, int64_t i);
/* Returns from the flow with code unless cond holds. */
void host_check_or_return(Host *h, LLVMValueRef cond, int32_t code);
/* Memory for v where the host writes it (run memory, a slot of the plan,
 * or an output's buffer), or (host_alloc_k) where the target's kernels do:
 * on a device, device run memory or a slot of the plan's block there. */
LLVMValueRef host_alloc(Host *h, Value *v);
LLVMValueRef host_alloc_k(Host *h, Value *v);
/* v's data where the target's kernels read it, or on the host. With
 * device memory the flow keeps a copy on each side that needs one: the
 * first kernel to read a value made on the host copies it in (a
 * constant's copy is the target's, const_dev), the first host op to read
 * one made on the device copies it out. Values never change (SSA), so
 * the copies stay valid. NULL with cg->d set when v has no buffer. */
LLVMValueRef host_kbuf(Host *h, Value *v);
LLVMValueRef host_hbuf(Host *h, Value *v);
/* An array of i8* in the entry block holding the given pointers. */
LLVMValueRef host_ptr_array(Host *h, LLVMValueRef *v, int n);
/* op on the host, through the reference interpreter's code (the target's
 * host_op hook). */
bool host_emit_host_op(Host *h, Op *op);
/* A library op (dot, conv, pool) as a direct runtime call (hostlib.c),
 * guarded where its layout holds only for some shapes; the host op where
 * the library does not take it. */
bool host_emit_library_op(Host *h, Op *op);
/* A library group: the call, with the start of its epilogue that the
 * library applies as it writes the result (bias, activation, residual
 * add), then the rest of the epilogue as a loop kernel. */
bool host_emit_library_group(Host *h, const Group *grp);
/* A loop, input or stitch group as a kernel launch (or split up). */
bool host_emit_kernel_group(Host *h, const Group *grp);

#endif
