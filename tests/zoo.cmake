# zoo.cmake — the shape-idiom zoo (label `zoo`): tests/zoo/CASE/VARIANT,
# small PyTorch modules exported by tests/zoo/gen_zoo.py (TorchScript at
# opsets 17 and 20: op17, op20; torch.export: dynamo) with ONNX Runtime's
# outputs at three shapes, each held by tests/zoo/run.py
# to its line in tests/zoo/expect.txt (pass, or refused with that located
# error):
#   zoo/CASE/VARIANT       on the interpreter
#   zoo/CASE/VARIANT/cpu   on the cpu backend (this machine's ISA: the model
#                        tests cover the others)
# The sanitizer build (make asan) runs the op20 variant of each case only:
# the three exports share their kernels' templates, and ASan's start-up per
# process would triple the suite's time.
file(STRINGS ${CMAKE_SOURCE_DIR}/tests/zoo/expect.txt DISC_ZOO_LINES REGEX "^[A-Za-z0-9_]+/[a-z0-9]+[ \t]")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/zoo/expect.txt)
foreach(line ${DISC_ZOO_LINES})
  string(REGEX MATCH "^[A-Za-z0-9_]+/[a-z0-9]+" key "${line}")
  if(DISC_SANITIZE AND NOT key MATCHES "/op20$")
    continue()
  endif()
  set(run ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/zoo/run.py --dcc $<TARGET_FILE:dcc>)
  add_test(NAME zoo/${key} COMMAND ${run} --backend interp ${key})
  set_tests_properties(zoo/${key} PROPERTIES LABELS "zoo;onnx")
  add_test(NAME zoo/${key}/cpu COMMAND ${run} --backend cpu ${key})
  set_tests_properties(zoo/${key}/cpu PROPERTIES LABELS "zoo;onnx;cpu")
endforeach()
