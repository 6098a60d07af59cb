# CUDA backends of the allocator and the PyTorch pluggable-allocator library.
#
# Included from src/CMakeLists.txt, so `gpumem` exists and paths below are
# relative to this file. The sources are plain C++ compiled against the CUDA
# headers (no kernels), so the CUDA language is never enabled and nvcc is only
# used by FindCUDAToolkit to locate the toolkit.

# GLOBAL: tests/ links CUDA::cudart too, and imported targets are otherwise
# visible only in this directory.
find_package(CUDAToolkit QUIET GLOBAL)

set(_gpumem_cuda_dir ${CMAKE_CURRENT_LIST_DIR})

if(CUDAToolkit_FOUND)
  message(STATUS "gpumem: CUDA backends built (CUDA ${CUDAToolkit_VERSION}, ${CUDAToolkit_LIBRARY_DIR}); libgpumem_torch.so will be built")
  target_sources(gpumem PRIVATE
    ${_gpumem_cuda_dir}/cuda_common.cpp
    ${_gpumem_cuda_dir}/cuda_driver.cpp
    ${_gpumem_cuda_dir}/cuda_status.cpp
    ${_gpumem_cuda_dir}/cuda_device_resource.cpp
    ${_gpumem_cuda_dir}/cuda_async_pool_resource.cpp
    ${_gpumem_cuda_dir}/pinned_host_resource.cpp
    ${_gpumem_cuda_dir}/cuda_virtual_memory.cpp
    ${_gpumem_cuda_dir}/cuda_events.cpp)
  # Only the runtime is linked: the driver API is looked up through it at run
  # time (cuda_driver.h says why libcuda is not linked). Static `gpumem`
  # passes cudart on to whatever links it.
  target_link_libraries(gpumem PRIVATE CUDA::cudart)
  # PUBLIC: tests and tools test `#if GPUMEM_HAVE_CUDA` before using CUDA.
  target_compile_definitions(gpumem PUBLIC GPUMEM_HAVE_CUDA=1)
  # libgpumem_torch.so below is a shared library made from the static
  # libgpumem, whose objects must therefore be position independent.
  set_target_properties(gpumem PROPERTIES POSITION_INDEPENDENT_CODE ON)

  # The library PyTorch loads with torch.cuda.memory.CUDAPluggableAllocator.
  add_library(gpumem_torch SHARED ${_gpumem_cuda_dir}/torch_plugin.cpp)
  target_include_directories(gpumem_torch PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(gpumem_torch PRIVATE gpumem CUDA::cudart)
  target_compile_options(gpumem_torch PRIVATE ${GPUMEM_WARNINGS})
  set_target_properties(gpumem_torch PROPERTIES
    LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  # Export only the gpumem_torch_* entry points: the static archives' symbols
  # (gpumem, fmt, ...) stay hidden so they cannot clash with copies inside the
  # Python process. --as-needed drops libraries no pulled-in object uses
  # (ONNX, protobuf), so the plugin loads where they are not installed.
  target_link_options(gpumem_torch PRIVATE -Wl,--exclude-libs,ALL -Wl,--as-needed)
  if(NOT GPUMEM_SANITIZE AND NOT GPUMEM_FUZZ)
    # Catch a missing symbol when linking rather than when Python loads it
    # (sanitizer and coverage runtimes leave symbols undefined in shared
    # libraries).
    target_link_options(gpumem_torch PRIVATE -Wl,--no-undefined)
  endif()
  set(GPUMEM_HAVE_CUDA ON)
else()
  message(STATUS "gpumem: CUDA toolkit not found: CUDA backends NOT built (they throw DeviceError); no libgpumem_torch.so")
  target_sources(gpumem PRIVATE ${_gpumem_cuda_dir}/cuda_unavailable.cpp)
  set(GPUMEM_HAVE_CUDA OFF)
endif()

# For tests/ and bench/, added after src/ from the top-level directory.
set(GPUMEM_HAVE_CUDA ${GPUMEM_HAVE_CUDA} PARENT_SCOPE)
set(CUDAToolkit_FOUND ${CUDAToolkit_FOUND} PARENT_SCOPE)
unset(_gpumem_cuda_dir)
