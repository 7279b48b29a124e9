# dnnl.cmake — oneDNN (Debian's libdnnl-dev) for the runtime's library
# thunks (runtime/dnnl.c). libdnnl is built on OpenMP (libgomp); dnnl.c
# finds libgomp's omp_set_num_threads in the process with dlopen/dlsym, so
# nothing links OpenMP here.
find_path(DNNL_INCLUDE oneapi/dnnl/dnnl.h REQUIRED)
find_library(DNNL_LIB dnnl REQUIRED)
target_include_directories(disc SYSTEM PUBLIC ${DNNL_INCLUDE})
target_link_libraries(disc PUBLIC ${DNNL_LIB} ${CMAKE_DL_LIBS} pthread)
