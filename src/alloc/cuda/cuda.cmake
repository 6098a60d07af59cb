# CUDA backends of the allocator and the PyTorch pluggable-allocator library.
#
# Included from src/alloc/CMakeLists.txt, so `gpumem_alloc` exists and
# paths below are relative to this file. The sources are plain C++ compiled against the CUDA
# headers (no kernels), so the CUDA language is never enabled and nvcc is only
# used by FindCUDAToolkit to locate the toolkit.

# The top-level CMakeLists.txt looks for the toolkit (CUDAToolkit_FOUND).
set(_gpumem_cuda_dir ${CMAKE_CURRENT_LIST_DIR})

if(CUDAToolkit_FOUND)
  message(STATUS "gpumem: CUDA backends built (CUDA ${CUDAToolkit_VERSION}, ${CUDAToolkit_LIBRARY_DIR}); libgpumem_torch.so will be built")
  target_sources(gpumem_alloc PRIVATE
    ${_gpumem_cuda_dir}/cuda_common.cpp
    ${_gpumem_cuda_dir}/cuda_driver.cpp
    ${_gpumem_cuda_dir}/cuda_status.cpp
    ${_gpumem_cuda_dir}/cuda_device_resource.cpp
    ${_gpumem_cuda_dir}/cuda_async_pool_resource.cpp
    ${_gpumem_cuda_dir}/pinned_host_resource.cpp
    ${_gpumem_cuda_dir}/cuda_virtual_memory.cpp
    ${_gpumem_cuda_dir}/cuda_events.cpp)
  # Only the runtime is linked: the driver API is looked up through it at run
  # time (cuda_driver.h says why libcuda is not linked). The static library
  # passes cudart on to whatever links it (an installed package finds it
  # with find_dependency(CUDAToolkit)).
  target_link_libraries(gpumem_alloc PRIVATE CUDA::cudart)
  set_property(GLOBAL APPEND PROPERTY GPUMEM_MODULE_PACKAGES_alloc CUDAToolkit)
  set_property(GLOBAL APPEND PROPERTY GPUMEM_MODULE_PC_LIBS_alloc -L${CUDAToolkit_LIBRARY_DIR} -lcudart)
  set_property(GLOBAL APPEND PROPERTY GPUMEM_MODULE_PC_CFLAGS_alloc -DGPUMEM_HAVE_CUDA=1)
  # PUBLIC: tests and tools test `#if GPUMEM_HAVE_CUDA` before using CUDA.
  target_compile_definitions(gpumem_alloc PUBLIC GPUMEM_HAVE_CUDA=1)
  # libgpumem_torch.so below is a shared library made from the static
  # libraries of alloc and what it uses, whose objects must therefore be
  # position independent.
  set_target_properties(gpumem_alloc gpumem_plan gpumem_common PROPERTIES POSITION_INDEPENDENT_CODE ON)

  # The library PyTorch loads with torch.cuda.memory.CUDAPluggableAllocator.
  add_library(gpumem_torch SHARED ${_gpumem_cuda_dir}/torch_plugin.cpp)
  target_include_directories(gpumem_torch PRIVATE ${GPUMEM_VIEWS_DIR}/src/alloc)
  target_link_libraries(gpumem_torch PRIVATE gpumem::alloc CUDA::cudart)
  target_compile_options(gpumem_torch PRIVATE ${GPUMEM_WARNINGS})
  set_target_properties(gpumem_torch PROPERTIES
    LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  # Export only the gpumem_torch_* entry points: the static archives' symbols
  # (gpumem, fmt, ...) stay hidden so they cannot clash with copies inside the
  # Python process. --as-needed drops libraries no pulled-in object uses.
  target_link_options(gpumem_torch PRIVATE -Wl,--exclude-libs,ALL -Wl,--as-needed)
  if(NOT GPUMEM_SANITIZE AND NOT GPUMEM_FUZZ)
    # Catch a missing symbol when linking rather than when Python loads it
    # (sanitizer and coverage runtimes leave symbols undefined in shared
    # libraries).
    target_link_options(gpumem_torch PRIVATE -Wl,--no-undefined)
  endif()
else()
  message(STATUS "gpumem: CUDA toolkit not found: CUDA backends NOT built (they throw DeviceError); no libgpumem_torch.so")
  target_sources(gpumem_alloc PRIVATE ${_gpumem_cuda_dir}/cuda_unavailable.cpp)
endif()

unset(_gpumem_cuda_dir)
