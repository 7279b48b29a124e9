/* aot.c — placeholder while the AOT path is written */
#include "codegen/host.h"
LLVMValueRef aot_const_ptr(struct Host *h, const Op *op) { (void)op; diag_set(h->cg->d, "aot"); return NULL; }
bool aot_emit_host_op(struct Host *h, Op *op) { (void)op; return diag_set(h->cg->d, "aot"); }
