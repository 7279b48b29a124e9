# examples.cmake — the example programs run as tests (label `examples`):
# the public API end to end, and an install into an empty prefix used
# through pkg-config.
if(TARGET compile_run)
  foreach(backend cpu interp)
    add_test(NAME examples/compile_run/${backend}
             COMMAND compile_run ${CMAKE_SOURCE_DIR}/tests/models/mlp_norm/model.onnx ${backend})
    set_tests_properties(examples/compile_run/${backend} PROPERTIES LABELS examples
                         PASS_REGULAR_EXPRESSION "run 3:.*sum")
  endforeach()
  add_test(NAME examples/demo COMMAND demo ${CMAKE_SOURCE_DIR}/tests/models/bert_encoder/model.onnx)
  set_tests_properties(examples/demo PROPERTIES LABELS examples
                       PASS_REGULAR_EXPRESSION "mismatched inputs: error: .* seq == seq_2 or one of them is 1 \\(3 vs 2\\) .*from input \"attention_mask\" dim 1")
  add_test(NAME examples/aot_example COMMAND aot_example)
  set_tests_properties(examples/aot_example PROPERTIES LABELS "examples;aot"
                       PASS_REGULAR_EXPRESSION "3, 197, 64.*status 1: bert: .*seq == seq_2 or one of them is 1; given: .*\"attention_mask\" \\[2, 12\\].*status 1: bert: .*input \"input_ids\" dim 0 \\(batch\\) must be >= 1")
  # the sanitizer build's archive needs the sanitizer runtime to link
  if(NOT DISC_SANITIZE)
  add_test(NAME examples/install_pkgconfig
           COMMAND sh ${CMAKE_SOURCE_DIR}/tests/install_test.sh ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR})
  set_tests_properties(examples/install_pkgconfig PROPERTIES LABELS examples TIMEOUT 300)
  endif()
endif()
