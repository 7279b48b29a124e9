# gpu.cmake — the GPU kernels, without a GPU (codegen/cuda.c, nvrtc.c, emu.c).
#   gpu-golden:  tests/golden/gpu/*.disc, the CUDA and HIP source of
#                representative groups (registered as golden tests, labelled
#                here too)
#   gpu-compile: every kernel of every test model compiled by NVRTC for
#                sm_80 and sm_90, to CUBIN and to PTX, and by HIPRTC for
#                gfx90a and gfx1030, one test per folder of models; skipped
#                (exit 77) with the reason without NVRTC (HIPRTC); and the
#                cache of compiled modules through dcc emit --stage cubin
file(GLOB DISC_GPU_GOLDEN CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/golden/gpu/*.disc)
foreach(f ${DISC_GPU_GOLDEN})
  get_filename_component(name ${f} NAME_WE)
  set_tests_properties(golden/gpu/${name} PROPERTIES LABELS "golden;gpu-golden")
endforeach()

file(GLOB DISC_GPU_INTERP CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/interp/*.disc)
file(GLOB DISC_GPU_CPU CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/cpu/*.disc)
file(GLOB DISC_GPU_MODELS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/models/*/model.onnx)
# The sanitizer build leaves out gpu-compile and the node tests on the
# emulator: NVRTC and HIPRTC are not instrumented, the source they compile
# is what gpu-emu's other tests generate, and ASan would double the time.
foreach(set interp cpu models)
  if(DISC_SANITIZE)
    break()
  endif()
  string(TOUPPER ${set} up)
  add_test(NAME gpu-compile/${set} COMMAND test_gpu --compile sm_80,sm_90 ${DISC_GPU_${up}})
  set_tests_properties(gpu-compile/${set} PROPERTIES LABELS gpu-compile SKIP_RETURN_CODE 77)
  # the same kernels as HIP, by HIPRTC, for a wave-64 and a wave-32 target
  add_test(NAME gpu-compile/hip/${set} COMMAND test_gpu --compile gfx90a,gfx1030 ${DISC_GPU_${up}})
  set_tests_properties(gpu-compile/hip/${set} PROPERTIES LABELS gpu-compile SKIP_RETURN_CODE 77)
endforeach()

# The cache of compiled modules: dcc emit --stage cubin twice with a cache
# directory of its own, the second read from the cache (skipped where NVRTC
# cannot be loaded).
if(NOT DISC_SANITIZE)
  set(cdir ${CMAKE_BINARY_DIR}/gpu-cache-test)
  add_test(NAME gpu-compile/cache
           COMMAND sh -c "rm -rf ${cdir} && for i in 1 2; do DISC_CACHE_DIR=${cdir} $<TARGET_FILE:dcc> emit ${CMAKE_SOURCE_DIR}/tests/golden/gpu/layernorm.disc --stage cubin --arch sm_80 -v -o ${cdir}.cubin || exit 1; done")
  set_tests_properties(gpu-compile/cache PROPERTIES LABELS gpu-compile
                       PASS_REGULAR_EXPRESSION "compiled in [0-9]+ ms, stored in .*from the cache"
                       SKIP_REGULAR_EXPRESSION "cannot load NVRTC")
endif()

# gpu-emu: the interpreter's test files and tests/cpu's on the emulator
# (backend cuda-emu), against the interpreter, as label cpu runs them on the
# cpu backend. A file the GPU path does not take yet (reductions, library
# calls) is skipped (exit 77) with the located "not supported on cuda yet"
# error as the reason.
# Each at warps of 32 lanes (gpu-emu/...) and of 64 (gpu-emu64/..., the
# emulator as a wave-64 AMD GPU); tests/gpu holds files for the GPU's
# run-time variants (shapes on both sides of each choice).
file(GLOB DISC_GPU_VARIANTS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/gpu/*.disc)
# tests/gpu's kernels through NVRTC and HIPRTC too (the tensor cores'
# inline PTX of gemm_mma.disc at sm_80 and sm_90)
if(NOT DISC_SANITIZE)
  add_test(NAME gpu-compile/gpu COMMAND test_gpu --compile sm_80,sm_90 ${DISC_GPU_VARIANTS})
  set_tests_properties(gpu-compile/gpu PROPERTIES LABELS gpu-compile SKIP_RETURN_CODE 77)
  add_test(NAME gpu-compile/hip/gpu COMMAND test_gpu --compile gfx90a,gfx1030 ${DISC_GPU_VARIANTS})
  set_tests_properties(gpu-compile/hip/gpu PROPERTIES LABELS gpu-compile SKIP_RETURN_CODE 77)
endif()
foreach(f ${DISC_GPU_INTERP} ${DISC_GPU_CPU} ${DISC_GPU_VARIANTS})
  get_filename_component(name ${f} NAME_WE)
  get_filename_component(dir ${f} DIRECTORY)
  get_filename_component(dir ${dir} NAME)
  add_test(NAME gpu-emu/${dir}/${name} COMMAND test_interp --emu ${f})
  set_tests_properties(gpu-emu/${dir}/${name} PROPERTIES LABELS gpu-emu SKIP_RETURN_CODE 77)
  add_test(NAME gpu-emu64/${dir}/${name} COMMAND test_interp --emu64 ${f})
  set_tests_properties(gpu-emu64/${dir}/${name} PROPERTIES LABELS gpu-emu SKIP_RETURN_CODE 77)
endforeach()
# The model tests (tests/models) on the emulator against ONNX Runtime's
# outputs, as model/NAME/cpu runs them; skipped where the model needs what
# the GPU path does not take yet (the output names the op and the reason).
file(GLOB DISC_GPU_MODEL_DIRS LIST_DIRECTORIES true CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/models/*)
foreach(dir ${DISC_GPU_MODEL_DIRS})
  file(GLOB sets LIST_DIRECTORIES true ${dir}/test_data_set_*)
  if(IS_DIRECTORY ${dir} AND EXISTS ${dir}/model.onnx AND sets)
    get_filename_component(name ${dir} NAME)
    foreach(emu cuda-emu cuda-emu64)
      string(REPLACE "cuda-" "gpu-" t ${emu})
      add_test(NAME ${t}/model/${name} COMMAND dcc check ${dir} --backend ${emu} --atol 1e-5)
      set_tests_properties(${t}/model/${name} PROPERTIES LABELS "gpu-emu;model"
                           SKIP_REGULAR_EXPRESSION "not supported on cuda yet")
    endforeach()
  endif()
endforeach()
# ONNX's node tests on the emulator, at warps of 32 and of 64 lanes: every
# test the interpreter must pass (tests/conformance/expected_pass.txt) must
# pass there too. At 64 lanes only the tests of ops whose kernels combine
# lanes (reductions, normalisations, matmuls, convolutions and pools: the
# shuffles and shared-memory trees that the warp's width shapes); a loop
# kernel's threads each compute their own elements at any width (the
# gpu-emu64 runs of tests/interp, tests/cpu and tests/gpu keep those).
set(DISC_EMU64_MATCH "reduce|softmax|hardmax|norm|argmax|argmin|topk|cumsum|mean|sum|max|min|logsumexp|variance|matmul|gemm|einsum|conv|pool|lrn")
if(NOT DISC_SANITIZE)
  foreach(emu cuda-emu cuda-emu64)
    string(REPLACE "cuda-" "gpu-" t ${emu})
    set(match "")
    if(emu STREQUAL "cuda-emu64")
      set(match "--match=${DISC_EMU64_MATCH}")
    endif()
    add_test(NAME ${t}/node_tests
             COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/conformance/run_node_tests.py
                     --dcc $<TARGET_FILE:dcc> -j 2 --timeout 120 --dcc-arg=--backend --dcc-arg=${emu} ${match})
    set_tests_properties(${t}/node_tests PROPERTIES LABELS "gpu-emu;onnx" SKIP_RETURN_CODE 77 TIMEOUT 2400)
  endforeach()
endif()
# The cuda backend without a driver: one error naming the library, exit 3.
find_library(DISC_LIBCUDA NAMES libcuda.so.1 cuda)
if(NOT DISC_LIBCUDA)
  add_test(NAME gpu/no_driver COMMAND sh -c "out=$($<TARGET_FILE:dcc> check ${CMAKE_SOURCE_DIR}/tests/models/mlp_norm --backend cuda 2>&1); rc=$?; echo \"$out\"; case \"$out\" in *'cannot load libcuda.so.1'*) test $rc -eq 3 && echo 'exit 3, the library named';; esac")
  set_tests_properties(gpu/no_driver PROPERTIES LABELS gpu-emu PASS_REGULAR_EXPRESSION "exit 3, the library named")
endif()

# The CUDA driver layer (runtime/cudrv.c) against a stand-in driver:
# tests/unit/fake_cuda.c built as fakecuda/libcuda.so.1 and found through
# LD_LIBRARY_PATH (unit/test_cudrv, without it, checks the no-driver error,
# or device 0 where a real driver is installed).
add_library(fake_cuda SHARED ${CMAKE_SOURCE_DIR}/tests/unit/fake_cuda.c)
set_target_properties(fake_cuda PROPERTIES OUTPUT_NAME cuda SOVERSION 1
                      LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/fakecuda)
target_include_directories(fake_cuda PRIVATE ${CMAKE_SOURCE_DIR})
# tests/unit/fake_cublaslt.c beside it as fakecuda/libcublasLt.so.13: the
# cuda backend's matmuls (runtime/cublaslt.c) on a stand-in that computes
# what cuBLASLt's documentation says of each call.
add_library(fake_cublaslt SHARED ${CMAKE_SOURCE_DIR}/tests/unit/fake_cublaslt.c)
set_target_properties(fake_cublaslt PROPERTIES OUTPUT_NAME cublasLt SOVERSION 13
                      LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/fakecuda)
target_link_libraries(fake_cublaslt PRIVATE m)
# the same source as fakecuda/libcublas.so.13: cuBLAS, cuBLASLt's fallback
add_library(fake_cublas SHARED ${CMAKE_SOURCE_DIR}/tests/unit/fake_cublaslt.c)
set_target_properties(fake_cublas PROPERTIES OUTPUT_NAME cublas SOVERSION 13
                      LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/fakecuda)
target_link_libraries(fake_cublas PRIVATE m)
# tests/unit/fake_cudnn.c as fakecuda/libcudnn.so.9: the cuda backend's
# convolutions (runtime/cudnn.c) on a stand-in that computes what cuDNN's
# documentation says of each call.
add_library(fake_cudnn SHARED ${CMAKE_SOURCE_DIR}/tests/unit/fake_cudnn.c)
set_target_properties(fake_cudnn PROPERTIES OUTPUT_NAME cudnn SOVERSION 9
                      LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/fakecuda)
target_link_libraries(fake_cudnn PRIVATE m)
add_test(NAME unit/test_cublaslt/fake COMMAND test_cublaslt --fake)
set_tests_properties(unit/test_cublaslt/fake PROPERTIES LABELS "unit;gpu-driver"
                     ENVIRONMENT "LD_LIBRARY_PATH=${CMAKE_BINARY_DIR}/fakecuda")
add_test(NAME unit/test_cublaslt/fake-profile COMMAND test_cublaslt --fake)
set_tests_properties(unit/test_cublaslt/fake-profile PROPERTIES LABELS "unit;gpu-driver"
                     ENVIRONMENT "LD_LIBRARY_PATH=${CMAKE_BINARY_DIR}/fakecuda;DISC_PROFILE=1")
set_tests_properties(unit/test_cublaslt PROPERTIES LABELS "unit;gpu-driver" SKIP_REGULAR_EXPRESSION "SKIP:")
add_test(NAME unit/test_cudnn/fake COMMAND test_cudnn --fake)
set_tests_properties(unit/test_cudnn/fake PROPERTIES LABELS "unit;gpu-driver"
                     ENVIRONMENT "LD_LIBRARY_PATH=${CMAKE_BINARY_DIR}/fakecuda")
add_test(NAME unit/test_cudnn/fake-profile COMMAND test_cudnn --fake)
set_tests_properties(unit/test_cudnn/fake-profile PROPERTIES LABELS "unit;gpu-driver"
                     ENVIRONMENT "LD_LIBRARY_PATH=${CMAKE_BINARY_DIR}/fakecuda;DISC_PROFILE=1")
set_tests_properties(unit/test_cudnn PROPERTIES LABELS "unit;gpu-driver" SKIP_REGULAR_EXPRESSION "SKIP:")
# runtime/cublaslt_abi.h against the toolkit's cublasLt.h, where it is.
find_path(DISC_CUBLASLT_H cublasLt.h PATHS /usr/local/cuda/include NO_DEFAULT_PATH)
if(DISC_CUBLASLT_H)
  add_executable(test_cublaslt_abi ${CMAKE_SOURCE_DIR}/tests/gpu/cublaslt_abi.c)
  target_include_directories(test_cublaslt_abi PRIVATE ${CMAKE_SOURCE_DIR})
  target_include_directories(test_cublaslt_abi SYSTEM PRIVATE ${DISC_CUBLASLT_H})
  add_test(NAME unit/test_cublaslt_abi COMMAND test_cublaslt_abi)
  set_tests_properties(unit/test_cublaslt_abi PROPERTIES LABELS "unit;gpu-driver")
endif()
# runtime/cudnn_abi.h against the toolkit's cudnn.h, where it is (cudnn.h
# marks the legacy API deprecated: that is the API disc calls).
find_path(DISC_CUDNN_H cudnn.h PATHS /usr/local/cuda/include NO_DEFAULT_PATH)
if(DISC_CUDNN_H)
  add_executable(test_cudnn_abi ${CMAKE_SOURCE_DIR}/tests/gpu/cudnn_abi.c)
  target_include_directories(test_cudnn_abi PRIVATE ${CMAKE_SOURCE_DIR})
  target_include_directories(test_cudnn_abi SYSTEM PRIVATE ${DISC_CUDNN_H})
  target_compile_options(test_cudnn_abi PRIVATE -Wno-deprecated-declarations)
  add_test(NAME unit/test_cudnn_abi COMMAND test_cudnn_abi)
  set_tests_properties(unit/test_cudnn_abi PROPERTIES LABELS "unit;gpu-driver")
endif()
add_test(NAME unit/test_cudrv/fake COMMAND test_cudrv --fake)
set_tests_properties(unit/test_cudrv/fake PROPERTIES LABELS "unit;gpu-driver"
                     ENVIRONMENT "LD_LIBRARY_PATH=${CMAKE_BINARY_DIR}/fakecuda")
# the copies staged through pinned buffers, chunks of 64 KiB (DISC_STAGE)
add_test(NAME unit/test_cudrv/fake-staged COMMAND test_cudrv --fake)
set_tests_properties(unit/test_cudrv/fake-staged PROPERTIES LABELS "unit;gpu-driver"
                     ENVIRONMENT "LD_LIBRARY_PATH=${CMAKE_BINARY_DIR}/fakecuda;DISC_STAGE=65536")
# and a model's inputs and outputs, chunks of 4 KiB
add_test(NAME gpu-driver/staged/bert_encoder COMMAND dcc check ${CMAKE_SOURCE_DIR}/tests/models/bert_encoder --backend cuda)
set_tests_properties(gpu-driver/staged/bert_encoder PROPERTIES LABELS gpu-driver
                     ENVIRONMENT "LD_LIBRARY_PATH=${CMAKE_BINARY_DIR}/fakecuda;DISC_CUDA_EMU_MODULES=1;DISC_STAGE=4096")
set_tests_properties(unit/test_cudrv PROPERTIES LABELS "unit;gpu-driver")

# The cuda backend (codegen/gpurun.c: the host flow with device memory,
# copies, constants uploaded once, launches with the grid, variant and
# shared memory the flow computes) end to end on the stand-in driver: the
# kernels compiled for the emulator (DISC_CUDA_EMU_MODULES=1), loaded and
# launched through runtime/cudrv.c, device memory at addresses the host
# cannot read. The interpreter's and tests/cpu's files and tests/gpu's
# against the interpreter, and the model tests against ONNX Runtime's
# outputs.
set(DISC_FAKE_ENV "LD_LIBRARY_PATH=${CMAKE_BINARY_DIR}/fakecuda;DISC_CUDA_EMU_MODULES=1")
foreach(set interp cpu gpu)
  string(TOUPPER ${set} up)
  set(files ${DISC_GPU_${up}})
  if(set STREQUAL "gpu")
    set(files ${DISC_GPU_VARIANTS})
  endif()
  add_test(NAME gpu-driver/${set} COMMAND test_interp --cuda ${files})
  set_tests_properties(gpu-driver/${set} PROPERTIES LABELS gpu-driver ENVIRONMENT "${DISC_FAKE_ENV}")
endforeach()
foreach(dir ${DISC_GPU_MODEL_DIRS})
  file(GLOB sets LIST_DIRECTORIES true ${dir}/test_data_set_*)
  if(IS_DIRECTORY ${dir} AND EXISTS ${dir}/model.onnx AND sets)
    get_filename_component(name ${dir} NAME)
    add_test(NAME gpu-driver/model/${name} COMMAND dcc check ${dir} --backend cuda --atol 1e-5)
    set_tests_properties(gpu-driver/model/${name} PROPERTIES LABELS "gpu-driver;model" ENVIRONMENT "${DISC_FAKE_ENV}")
  endif()
endforeach()
# disc's own GEMM kernel (DISC_CUBLASLT=0: every library group one of the
# module's kernels, as where cuBLASLt is not installed): the test files
# and the models whose dots take each epilogue.
foreach(set interp gpu)
  string(TOUPPER ${set} up)
  set(files ${DISC_GPU_${up}})
  if(set STREQUAL "gpu")
    set(files ${DISC_GPU_VARIANTS})
  endif()
  add_test(NAME gpu-driver/gemm-kernel/${set} COMMAND test_interp --cuda ${files})
  set_tests_properties(gpu-driver/gemm-kernel/${set} PROPERTIES LABELS gpu-driver
                       ENVIRONMENT "${DISC_FAKE_ENV};DISC_CUBLASLT=0")
endforeach()
foreach(name bert_encoder gpt_decoder mlp_norm recommender)
  add_test(NAME gpu-driver/gemm-kernel/model/${name} COMMAND dcc check ${CMAKE_SOURCE_DIR}/tests/models/${name}
           --backend cuda --atol 1e-5 -v)
  set_tests_properties(gpu-driver/gemm-kernel/model/${name} PROPERTIES LABELS gpu-driver
                       ENVIRONMENT "${DISC_FAKE_ENV};DISC_CUBLASLT=0"
                       PASS_REGULAR_EXPRESSION "matmuls on disc's GEMM kernel \\(DISC_CUBLASLT=0\\).*data sets passed")
endforeach()
# DISC_PROFILE names each cuBLASLt call by its shape and fused epilogue.
add_test(NAME gpu-driver/profile_cublaslt COMMAND dcc check ${CMAKE_SOURCE_DIR}/tests/models/gpt_decoder --backend cuda -v)
set_tests_properties(gpu-driver/profile_cublaslt PROPERTIES LABELS gpu-driver
                     ENVIRONMENT "${DISC_FAKE_ENV};DISC_PROFILE=1"
                     PASS_REGULAR_EXPRESSION "matmuls on cuBLASLt, convolutions and pooling on [^\n]*\n.*calls  cublasLt [0-9]+x[0-9]+x[0-9]+ f32 \\+bias \\+gelu\n")
# cuBLASLt with no algorithm (FAKE_CUBLASLT_NO_ALGO): every matmul on
# cuBLAS's cublasGemmStridedBatchedEx, and the bias and activation it was
# handed then the flow's kernel, in place
foreach(name gpt_decoder bert_encoder)
  add_test(NAME gpu-driver/cublas_fallback/${name} COMMAND dcc check ${CMAKE_SOURCE_DIR}/tests/models/${name} --backend cuda -v)
  set_tests_properties(gpu-driver/cublas_fallback/${name} PROPERTIES LABELS gpu-driver
                       ENVIRONMENT "${DISC_FAKE_ENV};DISC_PROFILE=1;FAKE_CUBLASLT_NO_ALGO=1"
                       PASS_REGULAR_EXPRESSION "calls  cublas [0-9]+x[0-9]+x[0-9]+ f32 \\(no cuBLASLt algorithm\\)\n.* data sets passed"
                       FAIL_REGULAR_EXPRESSION "FAIL|error:")
endforeach()
# A CNN's convolutions on the stand-in cuDNN, their epilogues fused
# (ResNet's bias, residual and ReLU in one call), and without it.
add_test(NAME gpu-driver/profile_cudnn COMMAND dcc check ${CMAKE_SOURCE_DIR}/tests/models/resnet_cnn --backend cuda -v)
set_tests_properties(gpu-driver/profile_cudnn PROPERTIES LABELS gpu-driver
                     ENVIRONMENT "${DISC_FAKE_ENV};DISC_PROFILE=1"
                     PASS_REGULAR_EXPRESSION "convolutions and pooling on cuDNN\n.*calls  cudnn conv 3x3 8->8 f32 \\+bias \\+residual \\+relu\n.*4 of 4 data sets passed")
add_test(NAME gpu-driver/no_cudnn COMMAND dcc check ${CMAKE_SOURCE_DIR}/tests/models/resnet_cnn --backend cuda -v)
set_tests_properties(gpu-driver/no_cudnn PROPERTIES LABELS gpu-driver ENVIRONMENT "${DISC_FAKE_ENV};DISC_CUDNN=0"
                     PASS_REGULAR_EXPRESSION "convolutions and pooling on disc's kernels \\(DISC_CUDNN=0\\).*4 of 4 data sets passed")
# The real compile path on the stand-in driver: NVRTC makes the CUBIN of a
# whole model for the device's sm_90, which the stand-in cannot load (it
# runs only the emulator's modules): the error must come from
# cuModuleLoadData. Skipped where NVRTC cannot be loaded.
add_test(NAME gpu-driver/nvrtc_module COMMAND dcc check ${CMAKE_SOURCE_DIR}/tests/models/bert_encoder --backend cuda)
set_tests_properties(gpu-driver/nvrtc_module PROPERTIES LABELS gpu-driver
                     ENVIRONMENT "LD_LIBRARY_PATH=${CMAKE_BINARY_DIR}/fakecuda"
                     PASS_REGULAR_EXPRESSION "backend cuda: cuModuleLoadData \\(a CUBIN for sm_90, or PTX, expected\\): CUDA_ERROR_INVALID_IMAGE"
                     SKIP_REGULAR_EXPRESSION "cannot load NVRTC")
# DISC_PROFILE on the cuda backend: each launch between two CUDA events
# (the stand-in's clock moves a millisecond a block), named by its group.
add_test(NAME gpu-driver/profile COMMAND dcc check ${CMAKE_SOURCE_DIR}/tests/models/mlp_norm --backend cuda)
set_tests_properties(gpu-driver/profile PROPERTIES LABELS gpu-driver
                     ENVIRONMENT "${DISC_FAKE_ENV};DISC_PROFILE=1"
                     PASS_REGULAR_EXPRESSION "kernels compiled for cuda sm_90 \\(disc fake GPU\\)[^\n]*\n[^\n]*ms [^\n]*disc_k[0-9] [a-z]+ \\(cuda\\)")
# The C API's cuda backend on the stand-in driver: disc_run and
# disc_run_device (inputs and outputs in device memory) on a model with a
# host op between kernels.
add_test(NAME unit/test_api_cuda/fake COMMAND test_api_cuda --fake)
set_tests_properties(unit/test_api_cuda/fake PROPERTIES LABELS "unit;gpu-driver" ENVIRONMENT "${DISC_FAKE_ENV}")
set_tests_properties(unit/test_api_cuda PROPERTIES LABELS "unit;gpu-driver")
# Random shapes, valid and not, on the cuda backend against the
# interpreter (dcc fuzz-shapes), on the stand-in driver: the transformer
# models, two CNNs, the recommender and the heads' reshapes; each binding
# that runs runs twice more on reversed inputs (a CUDA graph captured,
# then replayed).
foreach(name bert_encoder gpt_decoder resnet_cnn mobilenet_cnn recommender seq_heads)
  add_test(NAME gpu-driver/fuzz-shapes/${name} COMMAND dcc fuzz-shapes ${CMAKE_SOURCE_DIR}/tests/models/${name}
           --backend cuda --n 25 --max-dim 40)
  set_tests_properties(gpu-driver/fuzz-shapes/${name} PROPERTIES LABELS "gpu-driver;fuzz-shapes"
                       ENVIRONMENT "${DISC_FAKE_ENV}" PASS_REGULAR_EXPRESSION "25 bindings: .* 0 disagreed")
endforeach()
# A device number that is not one: one error naming the variable.
add_test(NAME gpu-driver/bad_device COMMAND dcc check ${CMAKE_SOURCE_DIR}/tests/models/mlp_norm --backend cuda)
set_tests_properties(gpu-driver/bad_device PROPERTIES LABELS gpu-driver
                     ENVIRONMENT "${DISC_FAKE_ENV};DISC_CUDA_DEVICE=one"
                     PASS_REGULAR_EXPRESSION "DISC_CUDA_DEVICE=one: not a device number")
