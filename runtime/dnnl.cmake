# dnnl.cmake — oneDNN (Debian's libdnnl-dev) and OpenMP for the runtime's
# library thunks (runtime/dnnl.c). libdnnl is built on OpenMP (libgomp);
# dnnl.c sets the OpenMP team size per call, so it links libgomp too (the
# library only: no -fopenmp on our sources).
find_path(DNNL_INCLUDE oneapi/dnnl/dnnl.h REQUIRED)
find_library(DNNL_LIB dnnl REQUIRED)
find_package(OpenMP REQUIRED COMPONENTS C)
target_include_directories(disc SYSTEM PUBLIC ${DNNL_INCLUDE})
target_link_libraries(disc PUBLIC ${DNNL_LIB} ${OpenMP_C_LIBRARIES} pthread)
