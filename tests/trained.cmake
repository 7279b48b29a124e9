# trained.cmake — trained models as users bring them (label `trained`).
#   trained/<name>       tests/trained/models/<name> (written by
#                        tests/trained/collect.py: models from PyPI packages,
#                        skl2onnx and onnxruntime's quantizer, with ONNX
#                        Runtime's outputs) through `dcc check --backend interp`
#   trained/<name>/cpu   the same on the cpu backend
# tests/trained/run.py holds each to its line in tests/trained/expect.txt
# (pass, or refused with located "unsupported op" errors naming exactly the
# listed ops); without the collection every test says SKIP and why (exit 77).
set(DISC_TRAINED_DIR ${CMAKE_SOURCE_DIR}/tests/trained/models CACHE PATH
    "where tests/trained/collect.py wrote the trained models")
file(STRINGS ${CMAKE_SOURCE_DIR}/tests/trained/expect.txt DISC_TRAINED_LINES REGEX "^[A-Za-z0-9_]+[ \t]")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/trained/expect.txt)
foreach(line ${DISC_TRAINED_LINES})
  string(REGEX MATCH "^[A-Za-z0-9_]+" name "${line}")
  set(run ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/trained/run.py --dcc $<TARGET_FILE:dcc>
          --models ${DISC_TRAINED_DIR})
  add_test(NAME trained/${name} COMMAND ${run} --backend interp ${name})
  set_tests_properties(trained/${name} PROPERTIES LABELS trained SKIP_RETURN_CODE 77 TIMEOUT 1500)
  # this machine's ISA only: the model tests cover the others
  add_test(NAME trained/${name}/cpu COMMAND ${run} --backend cpu ${name})
  set_tests_properties(trained/${name}/cpu PROPERTIES LABELS "trained;cpu" SKIP_RETURN_CODE 77 TIMEOUT 1500)
endforeach()
