# tests.cmake — registers every test with CTest, one named test per case.
#   unit:   tests/unit/test_*.c, one executable each
#   golden: tests/golden/**/*.disc, run by tests/golden/run.py against dcc
# Module folders may add their own tests in tests/<module>.cmake.

file(GLOB DISC_UNIT_TESTS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/unit/test_*.c)
foreach(src ${DISC_UNIT_TESTS})
  get_filename_component(name ${src} NAME_WE)
  add_executable(${name} ${src})
  target_link_libraries(${name} PRIVATE disc)
  target_compile_definitions(${name} PRIVATE DISC_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
  add_test(NAME unit/${name} COMMAND ${name})
  set_tests_properties(unit/${name} PROPERTIES LABELS unit)
endforeach()

find_package(Python3 COMPONENTS Interpreter REQUIRED)
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
