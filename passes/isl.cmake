# isl.cmake — ISL (the integer set library) for the constraint queries of
# passes/constraint.c. Included by the top-level CMakeLists.txt.

find_path(ISL_INCLUDE_DIR isl/set.h REQUIRED)
find_library(ISL_LIBRARY isl REQUIRED)
target_include_directories(disc PUBLIC ${ISL_INCLUDE_DIR})
target_link_libraries(disc PUBLIC ${ISL_LIBRARY})
