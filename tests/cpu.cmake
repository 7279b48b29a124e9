# cpu.cmake — the cpu backend against the reference interpreter (label
# `cpu`): test_interp --cpu compiles each file's graph once and runs every
# case on both (see tests/unit/test_interp.c). tests/cpu/*.disc give random
# inputs at several shapes (column reductions); the interpreter's own test
# files run there too, but two whose cpu results differ from the
# interpreter's today: argmax/argmin where NaN should win (arg_cumsum) and
# i64 -> bf16 rounding twice, through f32 (convert).
file(GLOB DISC_CPU_TESTS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/cpu/*.disc)
foreach(f ${DISC_CPU_TESTS})
  get_filename_component(name ${f} NAME_WE)
  add_test(NAME cpu/${name} COMMAND test_interp --cpu ${f})
  set_tests_properties(cpu/${name} PROPERTIES LABELS "unit;cpu")
endforeach()
set(DISC_CPU_DIFFER arg_cumsum convert)
file(GLOB DISC_CPU_INTERP_TESTS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/interp/*.disc)
foreach(f ${DISC_CPU_INTERP_TESTS})
  get_filename_component(name ${f} NAME_WE)
  if(NOT name IN_LIST DISC_CPU_DIFFER)
    add_test(NAME cpu/interp/${name} COMMAND test_interp --cpu ${f})
    set_tests_properties(cpu/interp/${name} PROPERTIES LABELS "unit;cpu")
  endif()
endforeach()
