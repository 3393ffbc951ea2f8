# Install rules and the CMake package: `cmake --install <build> --prefix P`
# puts
#   P/include/flash/{flash.hpp,flash.h,version.h,cp.hpp}
#   P/lib/libflash.{a,so} (and libflash_cp.{a,so} when NCCL was found)
#   P/lib/cmake/flash/{flashConfig,flashConfigVersion,flashTargets*}.cmake
#   P/lib/pkgconfig/flash.pc
# so that find_package(flash CONFIG) gives the imported target flash::flash
# (and flash::cp when flash_CP is ON),
# and `pkg-config --cflags --libs flash` the flags to build with it.
include(CMakePackageConfigHelpers)

set(flash_install_cmakedir ${CMAKE_INSTALL_LIBDIR}/cmake/flash)

# flash::cp, when built, joins the same export; it links the NCCL found at
# configure time by its absolute path.
set(flash_install_targets flash)
if(FLASH_HAS_CP)
  list(APPEND flash_install_targets flash_cp)
  set_target_properties(flash_cp PROPERTIES EXPORT_NAME cp)
endif()
install(TARGETS ${flash_install_targets}
  EXPORT flashTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/flash ${PROJECT_BINARY_DIR}/include/flash
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp")
install(EXPORT flashTargets
  NAMESPACE flash::
  DESTINATION ${flash_install_cmakedir})

# Recorded in flashConfig.cmake as flash_SHARED.
if(BUILD_SHARED_LIBS)
  set(BUILD_SHARED_LIBS_BOOL ON)
else()
  set(BUILD_SHARED_LIBS_BOOL OFF)
endif()
configure_package_config_file(cmake/flashConfig.cmake.in
  ${PROJECT_BINARY_DIR}/flashConfig.cmake
  INSTALL_DESTINATION ${flash_install_cmakedir})
# Before 1.0 a minor release may change the API, so 0.x.* matches only 0.x;
# from 1.0 on, any release of the same major version is compatible.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(flash_version_compatibility SameMinorVersion)
else()
  set(flash_version_compatibility SameMajorVersion)
endif()
write_basic_package_version_file(${PROJECT_BINARY_DIR}/flashConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY ${flash_version_compatibility})
install(FILES ${PROJECT_BINARY_DIR}/flashConfig.cmake ${PROJECT_BINARY_DIR}/flashConfigVersion.cmake
  DESTINATION ${flash_install_cmakedir})

# pkg-config: P/<libdir>/pkgconfig/flash.pc, from cmake/flash.pc.in. Its
# prefix is relative to the file (${pcfiledir}), like flashConfig.cmake's,
# since `cmake --install --prefix` may choose another one than the
# configured CMAKE_INSTALL_PREFIX; absolute install dirs stay absolute.
set(flash_pc_dir ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(flash_pc_prefix "${CMAKE_INSTALL_PREFIX}")
  set(flash_pc_libdir "${CMAKE_INSTALL_LIBDIR}")
else()
  file(RELATIVE_PATH flash_pc_up /flash_prefix/${flash_pc_dir} /flash_prefix)
  string(REGEX REPLACE "/$" "" flash_pc_up "${flash_pc_up}")
  set(flash_pc_prefix "\${pcfiledir}/${flash_pc_up}")
  set(flash_pc_libdir "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(flash_pc_includedir "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(flash_pc_includedir "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
# CUDA::cudart, which flash::flash links publicly: the toolkit's include
# directories (the first is ${cudaincludedir}) and its library directory.
list(GET CUDAToolkit_INCLUDE_DIRS 0 flash_pc_cuda_includedir)
set(flash_pc_cuda_cflags " -I\${cudaincludedir}")
foreach(dir IN LISTS CUDAToolkit_INCLUDE_DIRS)
  if(NOT dir STREQUAL flash_pc_cuda_includedir)
    string(APPEND flash_pc_cuda_cflags " -I${dir}")
  endif()
endforeach()
set(flash_pc_cuda_libdir "${CUDAToolkit_LIBRARY_DIR}")
# A static libflash.a brings none of its own dependencies: add the C++
# runtime libraries that a C compiler's link lacks (libstdc++ and libm with
# GCC), which CMake adds itself when a C program links flash::flash.
set(flash_pc_static_libs "")
get_target_property(flash_pc_type flash TYPE)
if(flash_pc_type STREQUAL "STATIC_LIBRARY")
  set(flash_pc_cxx_libs ${CMAKE_CXX_IMPLICIT_LINK_LIBRARIES})
  if(CMAKE_C_IMPLICIT_LINK_LIBRARIES)
    list(REMOVE_ITEM flash_pc_cxx_libs ${CMAKE_C_IMPLICIT_LINK_LIBRARIES})
  endif()
  list(REMOVE_DUPLICATES flash_pc_cxx_libs)
  foreach(lib IN LISTS flash_pc_cxx_libs)
    if(lib MATCHES "^-" OR IS_ABSOLUTE "${lib}")
      string(APPEND flash_pc_static_libs " ${lib}")
    else()
      string(APPEND flash_pc_static_libs " -l${lib}")
    endif()
  endforeach()
endif()
configure_file(cmake/flash.pc.in ${PROJECT_BINARY_DIR}/flash.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/flash.pc DESTINATION ${flash_pc_dir})
