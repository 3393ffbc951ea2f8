# package.pkgconfig_build: the programs of examples/consumer (C++) and
# examples/c (C99) compiled and linked with the compiler alone and the flags
# of `pkg-config --cflags --libs flash`, against the flash.pc installed under
# PREFIX. Run with cmake -P and
#   -DPKG_CONFIG= -DPREFIX= -DLIBDIR= (CMAKE_INSTALL_LIBDIR) -DVERSION=
#   -DC_COMPILER= -DCXX_COMPILER= -DSOURCE_DIR= -DBINARY_DIR=
# Building needs no GPU; the programs exit 77 without one.
cmake_minimum_required(VERSION 3.25)

set(pc_dir ${PREFIX}/${LIBDIR}/pkgconfig)
# Only the installed flash.pc: not one elsewhere on the machine.
set(ENV{PKG_CONFIG_PATH} ${pc_dir})
set(ENV{PKG_CONFIG_LIBDIR} ${pc_dir})

function(pkg_config out)
  execute_process(COMMAND ${PKG_CONFIG} ${ARGN} flash
    OUTPUT_VARIABLE value OUTPUT_STRIP_TRAILING_WHITESPACE COMMAND_ERROR_IS_FATAL ANY)
  set(${out} "${value}" PARENT_SCOPE)
endfunction()

pkg_config(version --modversion)
pkg_config(includedir --variable=includedir)
pkg_config(libdir --variable=libdir)
pkg_config(cudalibdir --variable=cudalibdir)
pkg_config(cflags --cflags)
pkg_config(libs --libs)
message(STATUS "flash ${version} through pkg-config: ${cflags} ${libs}")
if(NOT version STREQUAL VERSION)
  message(FATAL_ERROR "pkg-config gives flash ${version}; this build is ${VERSION}")
endif()
# The relative paths of flash.pc must land in the prefix.
foreach(dir IN ITEMS includedir libdir)
  file(REAL_PATH "${${dir}}" real)
  file(REAL_PATH "${PREFIX}" real_prefix)
  string(FIND "${real}/" "${real_prefix}/" at)
  if(NOT at EQUAL 0)
    message(FATAL_ERROR "flash.pc's ${dir} ${${dir}} is not under ${PREFIX}")
  endif()
endforeach()
if(NOT EXISTS "${includedir}/flash/flash.h")
  message(FATAL_ERROR "flash.pc's includedir ${includedir} has no flash/flash.h")
endif()

separate_arguments(cflags UNIX_COMMAND "${cflags}")
separate_arguments(libs UNIX_COMMAND "${libs}")
# So that the programs find a shared libflash and libcudart when run.
set(rpath -Wl,-rpath,${libdir} -Wl,-rpath,${cudalibdir})
file(REMOVE_RECURSE ${BINARY_DIR})
file(MAKE_DIRECTORY ${BINARY_DIR})
execute_process(COMMAND ${CXX_COMPILER} -std=c++17 ${cflags} ${SOURCE_DIR}/examples/consumer/main.cpp
    -o ${BINARY_DIR}/app ${libs} ${rpath}
  COMMAND_ECHO STDOUT COMMAND_ERROR_IS_FATAL ANY)
# libm for the example's own sqrt and exp.
execute_process(COMMAND ${C_COMPILER} -std=c99 ${cflags} ${SOURCE_DIR}/examples/c/attention_c.c
    -o ${BINARY_DIR}/app_c ${libs} -lm ${rpath}
  COMMAND_ECHO STDOUT COMMAND_ERROR_IS_FATAL ANY)
