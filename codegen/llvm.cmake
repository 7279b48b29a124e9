# llvm.cmake — the LLVM C API (Debian's llvm-14-dev) for the CPU backend.
find_program(LLVM_CONFIG NAMES llvm-config-14 llvm-config REQUIRED)
execute_process(COMMAND ${LLVM_CONFIG} --includedir OUTPUT_VARIABLE LLVM_INCLUDE OUTPUT_STRIP_TRAILING_WHITESPACE)
execute_process(COMMAND ${LLVM_CONFIG} --libdir OUTPUT_VARIABLE LLVM_LIBDIR OUTPUT_STRIP_TRAILING_WHITESPACE)
execute_process(COMMAND ${LLVM_CONFIG} --libs OUTPUT_VARIABLE LLVM_LIBS OUTPUT_STRIP_TRAILING_WHITESPACE)
string(REPLACE "-l" "" LLVM_LIBS "${LLVM_LIBS}")
target_include_directories(disc SYSTEM PUBLIC ${LLVM_INCLUDE})
target_link_directories(disc PUBLIC ${LLVM_LIBDIR})
target_link_libraries(disc PUBLIC ${LLVM_LIBS} pthread)
