# interp.cmake — the reference interpreter's numeric tests: each
# tests/interp/*.disc file (a graph, its inputs and expected outputs, see
# tests/unit/test_interp.c) is one named test run by test_interp.
file(GLOB DISC_INTERP_TESTS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/interp/*.disc)
foreach(f ${DISC_INTERP_TESTS})
  get_filename_component(name ${f} NAME_WE)
  add_test(NAME interp/${name} COMMAND test_interp ${f})
  set_tests_properties(interp/${name} PROPERTIES LABELS "unit;interp")
endforeach()
