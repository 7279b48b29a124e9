# cpu.cmake — the cpu backend against the reference interpreter (label
# `cpu`): test_interp --cpu compiles each file's graph once and runs every
# case on both (see tests/unit/test_interp.c). tests/cpu/*.disc give random
# inputs at several shapes (column reductions); the interpreter's own test
# files run there too.
file(GLOB DISC_CPU_TESTS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/cpu/*.disc)
foreach(f ${DISC_CPU_TESTS})
  get_filename_component(name ${f} NAME_WE)
  disc_test_isa(cpu/${name} LABELS unit cpu COMMAND test_interp --cpu ${f})
endforeach()
file(GLOB DISC_CPU_INTERP_TESTS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/interp/*.disc)
foreach(f ${DISC_CPU_INTERP_TESTS})
  get_filename_component(name ${f} NAME_WE)
  disc_test_isa(cpu/interp/${name} LABELS unit cpu COMMAND test_interp --cpu ${f})
endforeach()
# The layout pass (passes/layout.c): the five convolutions and pools of
# conv_nhwc.disc run channels-last (DISC_LAYOUT=nhwc), or blocked by 16
# channels for an AVX-512 target and by 8 for an AVX2 one
add_test(NAME cpu/conv_nhwc/kept
         COMMAND dcc compile ${CMAKE_SOURCE_DIR}/tests/cpu/conv_nhwc.disc -o ${CMAKE_BINARY_DIR}/conv_nhwc.o -v)
set_tests_properties(cpu/conv_nhwc/kept PROPERTIES LABELS "unit;cpu" ENVIRONMENT "DISC_LAYOUT=nhwc"
                     PASS_REGULAR_EXPRESSION "library calls \\(3 applying an epilogue\\).* 5 convolutions and pools channels-last")
foreach(t x86-64-v4:16 x86-64-v3:8)
  string(REPLACE ":" ";" tb ${t})
  list(GET tb 0 cpu)
  list(GET tb 1 blk)
  add_test(NAME cpu/conv_nhwc/blocked/${cpu}
           COMMAND dcc compile ${CMAKE_SOURCE_DIR}/tests/cpu/conv_nhwc.disc --cpu ${cpu} -o ${CMAKE_BINARY_DIR}/conv_nhwc_${cpu}.o -v)
  set_tests_properties(cpu/conv_nhwc/blocked/${cpu} PROPERTIES LABELS "unit;cpu"
                       PASS_REGULAR_EXPRESSION "library calls \\(3 applying an epilogue\\).* 5 convolutions and pools blocked by ${blk} channels")
endforeach()
# The strided 1x1 convolutions again on NCHW data (DISC_LAYOUT=plain: no
# channels-last values), where the subsampling copies single floats
add_test(NAME cpu/conv_strided_1x1/plain COMMAND test_interp --cpu ${CMAKE_SOURCE_DIR}/tests/cpu/conv_strided_1x1.disc)
set_tests_properties(cpu/conv_strided_1x1/plain PROPERTIES LABELS "unit;cpu" ENVIRONMENT "DISC_LAYOUT=plain")
# the same 3 x 3 convolutions on oneDNN's direct kernels (not by Winograd)
add_test(NAME cpu/conv_winograd/direct COMMAND test_interp --cpu ${CMAKE_SOURCE_DIR}/tests/cpu/conv_winograd.disc)
set_tests_properties(cpu/conv_winograd/direct PROPERTIES LABELS "unit;cpu" ENVIRONMENT "DISC_WINOGRAD=0")
# DISC_PROFILE under dcc bench: the timed runs only (each data set's first
# run, which creates oneDNN's primitives and packs weights, left out): 3
# sets x 2 runs give the stitch kernel 6 launches, not 9
add_test(NAME cpu/bench_profile COMMAND dcc bench ${CMAKE_SOURCE_DIR}/tests/models/mlp_norm --runs 2 --no-cache)
set_tests_properties(cpu/bench_profile PROPERTIES LABELS "unit;cpu" ENVIRONMENT "DISC_PROFILE=1"
                     PASS_REGULAR_EXPRESSION " 6 calls  disc_k0 stitch")
