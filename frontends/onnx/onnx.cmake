# onnx.cmake — the ONNX importer: generates the protobuf-c reader for the
# system's onnx.proto at build time and adds the importer to libdisc.
# Included (OPTIONAL) by the top-level CMakeLists.txt.

find_program(PROTOC_C protoc-c REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(PROTOBUF_C REQUIRED IMPORTED_TARGET libprotobuf-c)

set(DISC_ONNX_PROTO /usr/include/onnx/onnx.proto CACHE FILEPATH "onnx.proto to generate the ONNX reader from")
set(DISC_ONNX_GEN ${CMAKE_BINARY_DIR}/onnx-gen)

# protoc-c names its outputs after the proto's path relative to --proto_path,
# so the proto is copied next to the outputs first.
add_custom_command(
  OUTPUT ${DISC_ONNX_GEN}/onnx.pb-c.c ${DISC_ONNX_GEN}/onnx.pb-c.h
  COMMAND ${CMAKE_COMMAND} -E make_directory ${DISC_ONNX_GEN}
  COMMAND ${CMAKE_COMMAND} -E copy ${DISC_ONNX_PROTO} ${DISC_ONNX_GEN}/onnx.proto
  COMMAND ${PROTOC_C} --proto_path=${DISC_ONNX_GEN} --c_out=${DISC_ONNX_GEN} ${DISC_ONNX_GEN}/onnx.proto
  DEPENDS ${DISC_ONNX_PROTO}
  COMMENT "protoc-c onnx.proto"
  VERBATIM)

file(GLOB DISC_ONNX_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/frontends/onnx/*.c)
target_sources(disc PRIVATE ${DISC_ONNX_SOURCES} ${DISC_ONNX_GEN}/onnx.pb-c.c)
target_include_directories(disc PRIVATE ${DISC_ONNX_GEN})
target_link_libraries(disc PUBLIC PkgConfig::PROTOBUF_C)

# Generated code is not ours to keep warning-clean.
set_source_files_properties(${DISC_ONNX_GEN}/onnx.pb-c.c PROPERTIES
  GENERATED TRUE
  COMPILE_OPTIONS "-Wno-missing-prototypes;-Wno-strict-prototypes;-Wno-shadow;-Wno-unused-parameter;-Wno-error")
