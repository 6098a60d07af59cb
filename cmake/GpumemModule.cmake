# gpumem_module(): one module of libgpumem as its own static library.
#
#   gpumem_module(NAME alloc
#                 SOURCES caching_allocator.cpp ...      (relative to the calling folder)
#                 USES common plan                        (gpumem modules it may include and call)
#                 LINKS fmt::fmt                          (third-party libraries, linked privately)
#                 PUBLIC_LINKS nlohmann_json::nlohmann_json
#                 HEADERS alloc [RECURSE] [EXTRA_HEADERS gpumem.h] [EXCLUDE policies]
#                 [EMBEDDABLE]                            (one object per source: see below)
#                 PACKAGES fmt                            (what find_package finds for LINKS and PUBLIC_LINKS)
#                 PC_REQUIRES fmt  PC_LIBS -lpthread)     (the same for pkg-config)
#
# The direction of imports is enforced by include paths, not by convention:
# a module sees only its own headers and those of the modules it USES
# (transitively), through a view of symbolic links in the build tree:
#
#   build/views/include/<name>/gpumem/<dir>/<header>.h -> include/gpumem/<dir>/<header>.h
#   build/views/src/<name>/<dir>/<private header>.h   -> src/<dir>/<private header>.h
#
# So `#include "gpumem/trace/trace.h"` in src/alloc/ fails to compile ("No
# such file or directory"): alloc does not use trace. tests/layering proves
# it for every floor. A module's private headers (src/<dir>/*.h) are its
# own; common's are shared by every module (COMMON_INTERNALS), never
# installed.
#
# Each module is installed with its headers and an export set of its own, so
# that find_package(gpumem COMPONENTS alloc) brings in alloc and what it
# uses, nothing more (cmake/gpumemConfig.cmake.in).

set(GPUMEM_VIEWS_DIR ${PROJECT_BINARY_DIR}/views)

# Symbolic links to `files` (absolute paths under `from`) at the same
# relative paths under `to`, which is emptied first.
function(_gpumem_link_view from to)
  file(REMOVE_RECURSE ${to})
  foreach(file ${ARGN})
    file(RELATIVE_PATH rel ${from} ${file})
    get_filename_component(dir ${to}/${rel} DIRECTORY)
    file(MAKE_DIRECTORY ${dir})
    file(CREATE_LINK ${file} ${to}/${rel} SYMBOLIC)
  endforeach()
endfunction()

# The headers of a folder, recursively or not, without the subfolders in
# `exclude` (other modules' headers).
function(_gpumem_headers out dir recurse exclude)
  if(recurse)
    file(GLOB_RECURSE found CONFIGURE_DEPENDS ${dir}/*.h)
  else()
    file(GLOB found CONFIGURE_DEPENDS ${dir}/*.h)
  endif()
  foreach(sub ${exclude})
    list(FILTER found EXCLUDE REGEX "^${dir}/${sub}/")
  endforeach()
  set(${out} ${found} PARENT_SCOPE)
endfunction()

function(gpumem_module)
  cmake_parse_arguments(M "RECURSE;COMMON_INTERNALS;EMBEDDABLE" "NAME;HEADERS"
                        "SOURCES;USES;LINKS;PUBLIC_LINKS;EXTRA_HEADERS;EXCLUDE;PACKAGES;PC_REQUIRES;PC_LIBS" ${ARGN})
  set(target gpumem_${M_NAME})
  add_library(${target} STATIC ${M_SOURCES})
  add_library(gpumem::${M_NAME} ALIAS ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${M_NAME})

  # Public headers: include/gpumem/<HEADERS>/ (and EXTRA_HEADERS under include/gpumem/).
  set(include_root ${PROJECT_SOURCE_DIR}/include)
  _gpumem_headers(public ${include_root}/gpumem/${M_HEADERS} "${M_RECURSE}" "${M_EXCLUDE}")
  foreach(extra ${M_EXTRA_HEADERS})
    list(APPEND public ${include_root}/gpumem/${extra})
  endforeach()
  _gpumem_link_view(${include_root} ${GPUMEM_VIEWS_DIR}/include/${M_NAME} ${public})
  # Private headers: src/<dir>/**.h, as "<dir>/x.h".
  file(RELATIVE_PATH src_dir ${PROJECT_SOURCE_DIR}/src ${CMAKE_CURRENT_SOURCE_DIR})
  _gpumem_headers(private ${CMAKE_CURRENT_SOURCE_DIR} TRUE "${M_EXCLUDE}")
  _gpumem_link_view(${PROJECT_SOURCE_DIR}/src ${GPUMEM_VIEWS_DIR}/src/${M_NAME} ${private})

  target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${GPUMEM_VIEWS_DIR}/include/${M_NAME}>
                                              $<INSTALL_INTERFACE:include>)
  if(M_COMMON_INTERNALS)
    # common's own helpers (bounded JSON, file kinds, text) serve every module.
    target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${GPUMEM_VIEWS_DIR}/src/${M_NAME}>)
  else()
    target_include_directories(${target} PRIVATE ${GPUMEM_VIEWS_DIR}/src/${M_NAME})
  endif()
  foreach(use ${M_USES})
    target_link_libraries(${target} PUBLIC gpumem::${use})
  endforeach()
  target_link_libraries(${target} PUBLIC ${M_PUBLIC_LINKS} PRIVATE ${M_LINKS})
  target_compile_options(${target} PRIVATE ${GPUMEM_WARNINGS})
  # An EMBEDDABLE module (what an engine links alone: common, plan, alloc,
  # serve) keeps one object per source file, so that a program pulls in only
  # the files it calls (the allocator without the solver or the serving
  # simulator): unity batches would bring a whole batch along.
  if(GPUMEM_UNITY AND NOT M_EMBEDDABLE)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${GPUMEM_UNITY_BATCH})
  endif()

  # What installing it takes: the library, its headers, its export set.
  install(TARGETS ${target} EXPORT gpumem-${M_NAME}-targets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
          COMPONENT devel)
  foreach(header ${public})
    file(RELATIVE_PATH rel ${include_root} ${header})
    get_filename_component(dir ${rel} DIRECTORY)
    install(FILES ${header} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/${dir} COMPONENT devel)
  endforeach()
  install(EXPORT gpumem-${M_NAME}-targets NAMESPACE gpumem:: DESTINATION ${GPUMEM_CMAKE_INSTALL_DIR}
          FILE gpumem-${M_NAME}-targets.cmake COMPONENT devel)

  # For the package files, the layering tests and the fuzz build.
  set_property(GLOBAL APPEND PROPERTY GPUMEM_MODULES ${M_NAME})
  set_property(GLOBAL PROPERTY GPUMEM_MODULE_USES_${M_NAME} ${M_USES})
  set_property(GLOBAL PROPERTY GPUMEM_MODULE_PACKAGES_${M_NAME} ${M_PACKAGES})
  set_property(GLOBAL PROPERTY GPUMEM_MODULE_PC_REQUIRES_${M_NAME} ${M_PC_REQUIRES})
  set_property(GLOBAL PROPERTY GPUMEM_MODULE_PC_LIBS_${M_NAME} ${M_PC_LIBS})
endfunction()
