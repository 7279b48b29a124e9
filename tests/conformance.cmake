# conformance.cmake — numeric conformance through `dcc check` (label `onnx`).
#   onnx/node_tests  ONNX's own backend node tests (from the onnx pip package),
#                    run by tests/conformance/run_node_tests.py; the tests in
#                    tests/conformance/expected_pass.txt must pass
#   onnx/node_tests_cpu  the same list through the cpu backend
#   model/<name>     each tests/models/<name>/ with model.onnx and
#                    test_data_set_*, checked on every data set (label `model`),
#                    on the interpreter and (model/<name>/cpu) the cpu backend
add_test(NAME onnx/node_tests
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/conformance/run_node_tests.py
                 --dcc $<TARGET_FILE:dcc> -j 2 --timeout 60)
set_tests_properties(onnx/node_tests PROPERTIES LABELS onnx SKIP_RETURN_CODE 77 TIMEOUT 1800)
# The cpu backend must pass every node test the interpreter passes.
disc_test_isa(onnx/node_tests_cpu MAIN_ONLY_SANITIZED LABELS onnx cpu PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 2400
              COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/conformance/run_node_tests.py
                      --dcc $<TARGET_FILE:dcc> -j 2 --timeout 120 --dcc-arg=--backend --dcc-arg=cpu)

file(GLOB DISC_MODEL_DIRS LIST_DIRECTORIES true CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/models/*)
foreach(dir ${DISC_MODEL_DIRS})
  file(GLOB sets LIST_DIRECTORIES true ${dir}/test_data_set_*)
  if(IS_DIRECTORY ${dir} AND EXISTS ${dir}/model.onnx AND sets)
    get_filename_component(name ${dir} NAME)
    # swin_stage's residual sums cancel to about 1e-4 here and there, where
    # ONNX Runtime's float32 and the interpreter's double differ by 2e-7
    set(iopts "")
    if(name STREQUAL "swin_stage")
      set(iopts --atol 1e-6)
    endif()
    add_test(NAME model/${name} COMMAND dcc check ${dir} --backend interp ${iopts})
    set_tests_properties(model/${name} PROPERTIES LABELS "onnx;model")
    # float32 kernels against ONNX Runtime's float32: a looser absolute tolerance
    disc_test_isa(model/${name}/cpu LABELS onnx model cpu COMMAND dcc check ${dir} --backend cpu --atol 1e-5)
    # random shapes, valid and not, on the cpu backend against the interpreter
    # (issue 17; fewer under the sanitizers, which run them 10x slower)
    if(DISC_SANITIZE)
      set(nbind 30)
    else()
      set(nbind 150)
    endif()
    # loop_decode takes the argmax of tanh: inputs up to 2 drive it into
    # saturation, where two entries 2 ulps apart (tanh of 7.31 and 7.32)
    # round to one float in the interpreter's correctly rounded tanhf and
    # not in the kernels' (nor in ONNX Runtime's): an argmax flips
    set(fopts "")
    if(name STREQUAL "loop_decode")
      set(fopts --float-range 0.5)
    endif()
    add_test(NAME fuzz-shapes/${name} COMMAND dcc fuzz-shapes ${dir} --n ${nbind} ${fopts})
    set_tests_properties(fuzz-shapes/${name} PROPERTIES LABELS "fuzz-shapes;model"
                         PASS_REGULAR_EXPRESSION "${nbind} bindings: .* 0 disagreed")
  endif()
endforeach()
