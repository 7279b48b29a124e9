# tests.cmake — registers every test with CTest, one named test per case.
#   unit:   tests/unit/test_*.c, one executable each
#   golden: tests/golden/**/*.disc, run by tests/golden/run.py against dcc
# Module folders may add their own tests in tests/<module>.cmake.

# Every x86-64 machine. The tests of the cpu, model and aot labels run at
# this machine's ISA, and again through disc_test_isa as name@avx2 (kernels
# compiled for x86-64-v3, oneDNN capped to AVX2: what an AVX2 machine runs)
# where this machine has AVX-512, and as name@x86-64 (SSE2 kernels, oneDNN
# capped to SSE4.1), each copy labelled LABEL@ISA and @ISA; the main run's
# tests carry @<this machine's ISA> (ctest -L @avx2: every AVX2 copy). DISC_CPU is the compiler's default target
# (codegen/cpu.c); ONEDNN_MAX_CPU_ISA is oneDNN's own cap.
file(READ /proc/cpuinfo DISC_CPUINFO LIMIT 8192)
if(DISC_CPUINFO MATCHES "[ \t]avx512f[ \t\n]")
  set(DISC_HOST_ISA avx512f)
  set(DISC_ISA_CAPS avx2 x86-64)
elseif(DISC_CPUINFO MATCHES "[ \t]avx2[ \t\n]")
  set(DISC_HOST_ISA avx2)
  set(DISC_ISA_CAPS x86-64)
else()
  set(DISC_HOST_ISA sse2)
  set(DISC_ISA_CAPS "")
endif()
# The sanitizer build keeps the AVX2 copies (disc's own AVX2 kernels and
# weight layouts) and leaves the SSE2 ones to the plain build.
if(DISC_SANITIZE)
  list(REMOVE_ITEM DISC_ISA_CAPS x86-64)
endif()
set(DISC_ISA_ENV_avx2 "DISC_CPU=x86-64-v3;ONEDNN_MAX_CPU_ISA=AVX2")
set(DISC_ISA_ENV_x86-64 "DISC_CPU=x86-64;ONEDNN_MAX_CPU_ISA=SSE41")
# disc_test_isa(NAME [MAIN_ONLY_SANITIZED] LABELS l1;l2 [PROPERTIES k v ...] COMMAND cmd args...):
# MAIN_ONLY_SANITIZED: no copies in the sanitizer build (the long ones).
# @ISA@ in an argument becomes the copy's ISA ("native" in the main run),
# for scratch directories that copies running side by side must not share.
function(disc_test_isa name)
  cmake_parse_arguments(T "MAIN_ONLY_SANITIZED" "" "LABELS;PROPERTIES;COMMAND" ${ARGN})
  string(REPLACE "@ISA@" "native" cmd "${T_COMMAND}")
  add_test(NAME ${name} COMMAND ${cmd})
  set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS};@${DISC_HOST_ISA}" ${T_PROPERTIES})
  set(caps ${DISC_ISA_CAPS})
  if(DISC_SANITIZE AND T_MAIN_ONLY_SANITIZED)
    set(caps "")
  endif()
  foreach(isa ${caps})
    set(labels "@${isa}")
    foreach(l ${T_LABELS})
      list(APPEND labels "${l}@${isa}")
    endforeach()
    string(REPLACE "@ISA@" "${isa}" cmd "${T_COMMAND}")
    add_test(NAME ${name}@${isa} COMMAND ${cmd})
    set_tests_properties(${name}@${isa} PROPERTIES LABELS "${labels}" ENVIRONMENT "${DISC_ISA_ENV_${isa}}"
                         ${T_PROPERTIES})
  endforeach()
endfunction()
# On a machine without AVX-512 the AVX2 copies would repeat the main run:
# one test says so.
if(NOT "avx2" IN_LIST DISC_ISA_CAPS)
  add_test(NAME isa/avx2 COMMAND ${CMAKE_COMMAND} -E echo
           "SKIP: this CPU's widest ISA is ${DISC_HOST_ISA}: the main run of the cpu, model and aot labels is the AVX2 run")
  set_tests_properties(isa/avx2 PROPERTIES LABELS "isa;@avx2" SKIP_REGULAR_EXPRESSION "SKIP:")
endif()

file(GLOB DISC_UNIT_TESTS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/unit/test_*.c)
foreach(src ${DISC_UNIT_TESTS})
  get_filename_component(name ${src} NAME_WE)
  add_executable(${name} ${src})
  target_link_libraries(${name} PRIVATE disc)
  target_compile_definitions(${name} PRIVATE DISC_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
  add_test(NAME unit/${name} COMMAND ${name})
  set_tests_properties(unit/${name} PROPERTIES LABELS unit)
endforeach()
# test_oom fails the N-th allocation of disc's own code: every call of these
# from the objects linked into it goes through its __wrap_* functions.
target_link_options(test_oom PRIVATE
                    "LINKER:--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup,--wrap=strndup")
# the tests of threads (label threads: what make tsan runs under ThreadSanitizer)
set_tests_properties(unit/test_threads unit/test_api unit/test_rt PROPERTIES LABELS "unit;threads")

find_package(Python3 COMPONENTS Interpreter REQUIRED)
# The layering of the tree (ir <- runtime <- passes <- codegen <- api, dcc;
# no circle of calls in codegen/), read from the built objects' symbols.
add_test(NAME unit/layers COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/layers.py ${CMAKE_BINARY_DIR})
# bench/gpu_bench.py's weights rule (pinned values, Hankel, full rank) and its reading of ncu's CSV
add_test(NAME unit/gpu_bench COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/unit/test_gpu_bench.py)
set_tests_properties(unit/gpu_bench PROPERTIES LABELS unit PASS_REGULAR_EXPRESSION "test_gpu_bench: PASS")
# dcc cache: what the cache directory holds, --verify (damage found and removed), --clear
add_test(NAME unit/dcc_cache COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/unit/test_dcc_cache.py ${CMAKE_BINARY_DIR})
set_tests_properties(unit/dcc_cache PROPERTIES LABELS unit PASS_REGULAR_EXPRESSION "test_dcc_cache: PASS")
# DISC_PERF_MAP=1: the JIT's functions named for perf in /tmp/perf-<pid>.map
add_test(NAME unit/perf_map COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/unit/test_perf_map.py ${CMAKE_BINARY_DIR})
set_tests_properties(unit/perf_map PROPERTIES LABELS unit PASS_REGULAR_EXPRESSION "test_perf_map: PASS")
# libdisc.so through ctypes (bench/discpy.py, what run_bench.py --inproc runs)
add_test(NAME unit/discpy COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/unit/test_discpy.py ${CMAKE_BINARY_DIR})
set_tests_properties(unit/discpy PROPERTIES LABELS unit PASS_REGULAR_EXPRESSION "test_discpy: PASS")
if(DISC_SANITIZE)
  # an instrumented libdisc.so loaded by Python needs the ASan runtime first
  # in the process; Python's own allocations are not this project's leaks
  execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libasan.so
                  OUTPUT_VARIABLE DISC_LIBASAN OUTPUT_STRIP_TRAILING_WHITESPACE)
  set_tests_properties(unit/discpy PROPERTIES ENVIRONMENT "LD_PRELOAD=${DISC_LIBASAN};ASAN_OPTIONS=detect_leaks=0")
endif()
set_tests_properties(unit/layers PROPERTIES LABELS unit)
# The JIT with its sections mapped 8 GB apart (tests/unit/far_mmap.c, an
# LD_PRELOAD shim: as in a process with PyTorch's CUDA libraries loaded,
# where 32-bit offsets between an object's code, constants and GOT
# wrapped and the first run crashed): models compiled and checked on the
# cpu backend.
add_library(far_mmap SHARED ${CMAKE_SOURCE_DIR}/tests/unit/far_mmap.c)
target_link_libraries(far_mmap PRIVATE ${CMAKE_DL_LIBS} pthread)
set(DISC_FAR_PRELOAD $<TARGET_FILE:far_mmap>)
if(DISC_SANITIZE)
  set(DISC_FAR_PRELOAD "${DISC_LIBASAN}:$<TARGET_FILE:far_mmap>")
endif()
foreach(name bert_encoder mobilenet_cnn)
  add_test(NAME unit/far_sections/${name}
           COMMAND dcc check ${CMAKE_SOURCE_DIR}/tests/models/${name} --backend cpu --atol 1e-5 --no-cache)
  set_tests_properties(unit/far_sections/${name} PROPERTIES LABELS "unit;cpu"
                       ENVIRONMENT "LD_PRELOAD=${DISC_FAR_PRELOAD}")
endforeach()
file(GLOB_RECURSE DISC_GOLDEN_TESTS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/golden/*.disc)
foreach(f ${DISC_GOLDEN_TESTS})
  file(RELATIVE_PATH rel ${CMAKE_SOURCE_DIR}/tests/golden ${f})
  string(REGEX REPLACE "\\.disc$" "" rel ${rel})
  add_test(NAME golden/${rel}
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/golden/run.py
                   --dcc $<TARGET_FILE:dcc> --tmp ${CMAKE_BINARY_DIR}/golden ${f})
  set_tests_properties(golden/${rel} PROPERTIES LABELS golden)
endforeach()

file(GLOB DISC_MODULE_TESTS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/*.cmake)
foreach(m ${DISC_MODULE_TESTS})
  if(NOT m STREQUAL ${CMAKE_SOURCE_DIR}/tests/tests.cmake)
    include(${m})
  endif()
endforeach()
