# aot.cmake — models compiled ahead of time (dcc compile), linked into a C
# program with only the runtime archive, against the JIT at every data set
# (label `aot`): every test model as an object, BERT with a weights file,
# the GPT decoder as a shared object, and an IR model with host ops.
set(DISC_AOT_CFLAGS "")
if(DISC_SANITIZE)
  set(DISC_AOT_CFLAGS "-fsanitize=address,undefined -fno-omit-frame-pointer")
endif()
function(disc_aot_test name model mode)
  disc_test_isa(aot/${name} LABELS aot PROPERTIES TIMEOUT 600
                COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/aot/run_aot.py
                        --dcc $<TARGET_FILE:dcc> --rtlib ${CMAKE_BINARY_DIR}/public/libdisc_rt.a
                        --tmp ${CMAKE_BINARY_DIR}/aot/@ISA@ --mode ${mode} "--cflags=${DISC_AOT_CFLAGS}" ${ARGN} ${model})
endfunction()
file(GLOB DISC_AOT_MODELS LIST_DIRECTORIES true CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/models/*)
foreach(dir ${DISC_AOT_MODELS})
  if(IS_DIRECTORY ${dir} AND EXISTS ${dir}/model.onnx)
    get_filename_component(name ${dir} NAME)
    disc_aot_test(${name} ${dir} obj)
  endif()
endforeach()
disc_aot_test(bert_encoder/weights ${CMAKE_SOURCE_DIR}/tests/models/bert_encoder weights)
disc_aot_test(gpt_decoder/so ${CMAKE_SOURCE_DIR}/tests/models/gpt_decoder so)
disc_aot_test(hostop ${CMAKE_SOURCE_DIR}/tests/aot/hostop.disc obj)
# dcc compile's usage errors: one line that says what is wrong
set(mlp ${CMAKE_SOURCE_DIR}/tests/models/mlp_norm/model.onnx)
add_test(NAME aot/usage/extension COMMAND dcc compile ${mlp} -o ${CMAKE_BINARY_DIR}/aot/x.txt)
set_tests_properties(aot/usage/extension PROPERTIES LABELS aot
                     PASS_REGULAR_EXPRESSION "error: -o .*x.txt: the output is an object \\(.o\\) or a shared object")
add_test(NAME aot/usage/name COMMAND dcc compile ${mlp} -o ${CMAKE_BINARY_DIR}/aot/x.o --name 9lives)
set_tests_properties(aot/usage/name PROPERTIES LABELS aot PASS_REGULAR_EXPRESSION "--name 9lives: not a C identifier")
add_test(NAME aot/usage/unsupported COMMAND dcc compile ${CMAKE_SOURCE_DIR}/tests/golden/errors/unknown_op.disc
         -o ${CMAKE_BINARY_DIR}/aot/x.o)
set_tests_properties(aot/usage/unsupported PROPERTIES LABELS aot PASS_REGULAR_EXPRESSION "unknown_op.disc:[0-9]+:[0-9]+: error")
disc_aot_test(epilogue ${CMAKE_SOURCE_DIR}/tests/aot/epilogue.disc obj)
disc_aot_test(skinny ${CMAKE_SOURCE_DIR}/tests/aot/skinny.disc obj)
disc_aot_test(split ${CMAKE_SOURCE_DIR}/tests/aot/split.disc obj)
# --no-fuse: one kernel per op, more launches than the fused object's
add_test(NAME aot/no_fuse COMMAND sh -c "k() { $<TARGET_FILE:dcc> compile ${mlp} -o ${CMAKE_BINARY_DIR}/aot/nf.o -v \"$@\" 2>&1 | sed -n 's/.* \\([0-9]*\\) kernel launches.*/\\1/p'; }; a=$(k); b=$(k --no-fuse); echo \"fused $a, unfused $b\"; test \"$b\" -gt \"$a\" && echo 'unfused has more launches'" sh)
set_tests_properties(aot/no_fuse PROPERTIES LABELS aot PASS_REGULAR_EXPRESSION "unfused has more launches")
# for any x86-64 machine, not only this one
disc_aot_test(bert_encoder/x86-64 ${CMAKE_SOURCE_DIR}/tests/models/bert_encoder obj --cpu x86-64)
add_test(NAME aot/usage/cpu COMMAND dcc compile ${mlp} -o ${CMAKE_BINARY_DIR}/aot/x.o --cpu pentium9000)
set_tests_properties(aot/usage/cpu PROPERTIES LABELS aot PASS_REGULAR_EXPRESSION "--cpu pentium9000: not a CPU LLVM knows")
disc_aot_test(edges ${CMAKE_SOURCE_DIR}/tests/aot/edges.disc obj)
disc_aot_test(columns ${CMAKE_SOURCE_DIR}/tests/aot/columns.disc obj)
# cuda models ahead of time (dcc compile --backend cuda: the kernels as
# module images in the object, loaded by the first run) on the stand-in
# driver, with the emulator's image (DISC_CUDA_EMU_MODULES=1): every test
# model as an object, BERT with a weights file (constants uploaded from
# it by the first run), the IR model with host ops.
foreach(dir ${DISC_AOT_MODELS})
  if(IS_DIRECTORY ${dir} AND EXISTS ${dir}/model.onnx)
    get_filename_component(name ${dir} NAME)
    set(cuda_models ${cuda_models} ${name}:obj:${dir})
  endif()
endforeach()
set(cuda_models ${cuda_models} bert_encoder/weights:weights:${CMAKE_SOURCE_DIR}/tests/models/bert_encoder
    hostop:obj:${CMAKE_SOURCE_DIR}/tests/aot/hostop.disc epilogue_f16:obj:${CMAKE_SOURCE_DIR}/tests/aot/epilogue_f16.disc)
foreach(entry ${cuda_models})
  string(REPLACE ":" ";" parts ${entry})
  list(GET parts 0 name)
  list(GET parts 1 mode)
  list(GET parts 2 model)
  add_test(NAME aot-cuda/${name}
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/aot/run_aot.py --backend cuda
                   --dcc $<TARGET_FILE:dcc> --rtlib ${CMAKE_BINARY_DIR}/public/libdisc_rt.a
                   --tmp ${CMAKE_BINARY_DIR}/aot/cuda --mode ${mode} "--cflags=${DISC_AOT_CFLAGS}" ${model})
  set_tests_properties(aot-cuda/${name} PROPERTIES LABELS "aot;gpu-driver" TIMEOUT 600
                       ENVIRONMENT "LD_LIBRARY_PATH=${CMAKE_BINARY_DIR}/fakecuda;DISC_CUDA_EMU_MODULES=1")
endforeach()
add_test(NAME aot-cuda/usage/gpu_arch COMMAND dcc compile ${mlp} -o ${CMAKE_BINARY_DIR}/aot/x.o --gpu-arch sm_90)
set_tests_properties(aot-cuda/usage/gpu_arch PROPERTIES LABELS aot PASS_REGULAR_EXPRESSION "--gpu-arch goes with --backend cuda")
add_test(NAME aot-cuda/usage/bad_arch COMMAND dcc compile ${mlp} -o ${CMAKE_BINARY_DIR}/aot/x.o --backend cuda --gpu-arch 90)
set_tests_properties(aot-cuda/usage/bad_arch PROPERTIES LABELS aot PASS_REGULAR_EXPRESSION "--gpu-arch 90: not a list of sm_XY")
