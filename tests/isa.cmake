# isa.cmake — the target CPU (codegen/cpu.c) as the tests' ISA copies set
# it (label `isa`): DISC_CPU and --cpu reach the JIT, which reports the
# vector shape its kernels were built for; an unknown name is an error
# naming where it came from.
set(mlp ${CMAKE_SOURCE_DIR}/tests/models/mlp_norm)
add_test(NAME isa/target/env COMMAND dcc check ${mlp} --backend cpu -v)
set_tests_properties(isa/target/env PROPERTIES LABELS isa ENVIRONMENT "DISC_CPU=x86-64-v3"
                     PASS_REGULAR_EXPRESSION "kernels for CPU x86-64-v3 \\(avx2, 256-bit vectors, 16 registers\\)")
add_test(NAME isa/target/option COMMAND dcc check ${mlp} --backend cpu -v --cpu x86-64)
set_tests_properties(isa/target/option PROPERTIES LABELS isa ENVIRONMENT "DISC_CPU=x86-64-v3"
                     PASS_REGULAR_EXPRESSION "kernels for CPU x86-64 \\(sse2, 128-bit vectors, 16 registers\\)")
add_test(NAME isa/target/unknown COMMAND dcc check ${mlp} --backend cpu)
set_tests_properties(isa/target/unknown PROPERTIES LABELS isa ENVIRONMENT "DISC_CPU=pentium9000"
                     PASS_REGULAR_EXPRESSION "error: DISC_CPU=pentium9000: not a CPU LLVM knows")
if(DISC_HOST_ISA STREQUAL "avx512f")
  add_test(NAME isa/target/avx512 COMMAND dcc check ${mlp} --backend cpu -v --cpu x86-64-v4)
  set_tests_properties(isa/target/avx512 PROPERTIES LABELS isa
                       PASS_REGULAR_EXPRESSION "kernels for CPU x86-64-v4 \\(avx512f, 512-bit vectors, 32 registers\\)")
endif()
# The machine code itself (tests/isa_code.py: the JIT's cached objects
# disassembled): kernels for x86-64 use no ymm or zmm register, kernels
# for x86-64-v3 no zmm, whatever this machine has
set(bert ${CMAKE_SOURCE_DIR}/tests/models/bert_encoder)
add_test(NAME isa/code/x86-64 COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/isa_code.py
         $<TARGET_FILE:dcc> ${bert} x86-64 xmm ${CMAKE_BINARY_DIR}/isa-code-x86-64)
add_test(NAME isa/code/x86-64-v3 COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/isa_code.py
         $<TARGET_FILE:dcc> ${bert} x86-64-v3 ymm ${CMAKE_BINARY_DIR}/isa-code-x86-64-v3)
set_tests_properties(isa/code/x86-64 isa/code/x86-64-v3 PROPERTIES LABELS isa)
