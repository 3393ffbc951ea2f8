# Install rules and the CMake package: `cmake --install <build> --prefix P`
# puts
#   P/include/flash/{flash.hpp,flash.h,version.h}
#   P/lib/libflash.{a,so}
#   P/lib/cmake/flash/{flashConfig,flashConfigVersion,flashTargets*}.cmake
# so that find_package(flash CONFIG) gives the imported target flash::flash.
include(CMakePackageConfigHelpers)

set(flash_install_cmakedir ${CMAKE_INSTALL_LIBDIR}/cmake/flash)

install(TARGETS flash
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
