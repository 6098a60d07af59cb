# What `cmake --install` leaves for other projects: a CMake package with one
# component per module (find_package(gpumem COMPONENTS alloc serve)) and a
# pkg-config file per module (pkg-config --libs gpumem-alloc gpumem-serve).
# Both are made from what the modules declared in gpumem_module(): the
# modules each uses and the third-party packages each links.
include(CMakePackageConfigHelpers)

get_property(_modules GLOBAL PROPERTY GPUMEM_MODULES)
# The .pc files find the prefix from where they are (pkg-config's
# ${pcfiledir}), so an installed tree can be moved or installed with
# `cmake --install --prefix` anywhere.
file(RELATIVE_PATH _pc_to_prefix /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
set(_pc_prefix "\${pcfiledir}/${_pc_to_prefix}")
set(_components "# Written by cmake/GpumemPackage.cmake: each component, the components it\n")
string(APPEND _components "# uses, and the packages its libraries need, in the order they are loaded.\n")
string(APPEND _components "set(_gpumem_components ${_modules})\n")
foreach(module ${_modules})
  get_property(uses GLOBAL PROPERTY GPUMEM_MODULE_USES_${module})
  get_property(packages GLOBAL PROPERTY GPUMEM_MODULE_PACKAGES_${module})
  get_property(pc_requires GLOBAL PROPERTY GPUMEM_MODULE_PC_REQUIRES_${module})
  get_property(pc_libs GLOBAL PROPERTY GPUMEM_MODULE_PC_LIBS_${module})
  get_property(pc_cflags GLOBAL PROPERTY GPUMEM_MODULE_PC_CFLAGS_${module})
  string(APPEND _components "set(_gpumem_uses_${module} ${uses})\nset(_gpumem_packages_${module} ${packages})\n")

  # pkg-config: gpumem-<module>.pc requires the modules it uses, so that
  # --libs lists every archive a static link needs, in order.
  set(requires "")
  foreach(use ${uses})
    list(APPEND requires gpumem-${use})
  endforeach()
  list(APPEND requires ${pc_requires})
  list(REMOVE_DUPLICATES requires)
  string(REPLACE ";" " " requires "${requires}")
  string(REPLACE ";" " " pc_libs "${pc_libs}")
  string(REPLACE ";" " " pc_cflags "${pc_cflags}")
  file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/pkgconfig/gpumem-${module}.pc CONTENT
"prefix=${_pc_prefix}
libdir=\${prefix}/${CMAKE_INSTALL_LIBDIR}
includedir=\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}

Name: gpumem-${module}
Description: gpumem's ${module} module (static library)
Version: ${PROJECT_VERSION}
Requires: ${requires}
Libs: -L\${libdir} -lgpumem_${module} ${pc_libs}
Cflags: -I\${includedir} ${pc_cflags}
")
  install(FILES ${PROJECT_BINARY_DIR}/pkgconfig/gpumem-${module}.pc
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT devel)
endforeach()

# gpumem.pc: every module.
set(_all "")
foreach(module ${_modules})
  string(APPEND _all " gpumem-${module}")
endforeach()
file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/pkgconfig/gpumem.pc CONTENT
"prefix=${_pc_prefix}

Name: gpumem
Description: gpumem: every module (model memory, planning, the allocator, traces, training, inference, monitoring)
Version: ${PROJECT_VERSION}
Requires:${_all}
")
install(FILES ${PROJECT_BINARY_DIR}/pkgconfig/gpumem.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
        COMPONENT devel)

file(WRITE ${PROJECT_BINARY_DIR}/package/gpumem-components.cmake "${_components}")
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/gpumemConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/package/gpumemConfig.cmake
                              INSTALL_DESTINATION ${GPUMEM_CMAKE_INSTALL_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/package/gpumemConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/package/gpumemConfig.cmake ${PROJECT_BINARY_DIR}/package/gpumemConfigVersion.cmake
              ${PROJECT_BINARY_DIR}/package/gpumem-components.cmake
        DESTINATION ${GPUMEM_CMAKE_INSTALL_DIR} COMPONENT devel)
