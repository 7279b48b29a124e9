# fuzz.cmake — the fuzz targets of tests/fuzz/ (label `fuzz`): the ONNX
# importer, the IR text parser, the AOT weights reader and a compiled
# model's run-time input checks. Each is built with replay.c as main and
# replayed by ctest over its seed corpus and tests/fuzz/regress/TARGET/
# (every crash input a fuzz run found stays there after its fix); with
# DISC_FUZZ (make fuzz: clang, libFuzzer) the same files are the fuzzers.
set(F ${CMAKE_SOURCE_DIR}/tests/fuzz)
set(DISC_FUZZ_SEEDS_onnx ${CMAKE_SOURCE_DIR}/tests/onnx/models)
set(DISC_FUZZ_SEEDS_ir ${CMAKE_SOURCE_DIR}/tests/golden/ir ${CMAKE_SOURCE_DIR}/tests/interp)
set(DISC_FUZZ_SEEDS_weights ${F}/corpus/weights)
set(DISC_FUZZ_SEEDS_shapes ${F}/corpus/shapes)
foreach(t onnx ir weights shapes)
  if(DISC_FUZZ)
    add_executable(fuzz_${t} ${F}/fuzz_${t}.c)
    target_link_options(fuzz_${t} PRIVATE -fsanitize=fuzzer)
  else()
    add_executable(fuzz_${t} ${F}/fuzz_${t}.c ${F}/replay.c)
  endif()
  target_link_libraries(fuzz_${t} PRIVATE disc)
  target_include_directories(fuzz_${t} PRIVATE ${F} ${CMAKE_BINARY_DIR}/onnx-gen)
  target_compile_definitions(fuzz_${t} PRIVATE DISC_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
  if(NOT DISC_FUZZ)
    add_test(NAME fuzz/replay/${t} COMMAND fuzz_${t} ${DISC_FUZZ_SEEDS_${t}} ${F}/regress/${t})
    set_tests_properties(fuzz/replay/${t} PROPERTIES LABELS fuzz ENVIRONMENT "ASAN_OPTIONS=allocator_may_return_null=1")
  endif()
endforeach()
