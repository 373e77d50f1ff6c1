# ctest torch_versions: dsv4cpu_check_torch_versions (cmake/torch_versions.cmake) on made-up
# torch trees: a wheel's headers with Debian's versioned libtorch_cpu.so (the mix-up that builds
# a module that does not import) and with another wheel's interpreter fail the configure naming
# both versions; one torch (a wheel's layout, Debian's) passes.
# -DWORK_DIR=<scratch folder>; run again with -DCHECK_ARGS=<arguments> for one check.
cmake_minimum_required(VERSION 3.25)
if(DEFINED CHECK_ARGS)
  include(${CMAKE_CURRENT_LIST_DIR}/torch_versions.cmake)
  dsv4cpu_check_torch_versions(${CHECK_ARGS})
  return()
endif()

file(REMOVE_RECURSE "${WORK_DIR}")
function(make_headers dir major minor patch)
  file(WRITE "${dir}/torch/headeronly/version.h"
       "#define TORCH_VERSION_MAJOR ${major}\n#define TORCH_VERSION_MINOR ${minor}\n"
       "#define TORCH_VERSION_PATCH ${patch}\n")
endfunction()
# A wheel: site-packages/torch/{include,lib,version.py}.
set(wheel "${WORK_DIR}/venv/torch")
make_headers("${wheel}/include" 2 15 0)
file(WRITE "${wheel}/lib/libtorch_cpu.so" "")
file(WRITE "${wheel}/lib/libc10.so" "")
file(WRITE "${wheel}/version.py" "__version__ = '2.15.0+cu130'\n")
# Debian: /usr/include and versioned libraries behind a symbolic link.
set(debian "${WORK_DIR}/usr")
file(WRITE "${debian}/include/torch/version.h" "#define TORCH_VERSION_MAJOR 1\n"
     "#define TORCH_VERSION_MINOR 13\n#define TORCH_VERSION_PATCH 0\n")
file(WRITE "${debian}/lib/libtorch_cpu.so.1.13.0" "")
file(CREATE_LINK libtorch_cpu.so.1.13.0 "${debian}/lib/libtorch_cpu.so" SYMBOLIC)

set(failures "")
function(expect name status message)
  execute_process(COMMAND ${CMAKE_COMMAND} "-DCHECK_ARGS=${ARGN}" -P ${CMAKE_CURRENT_LIST_FILE}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  string(REGEX REPLACE "[ \n]+" " " out "${out}")
  if((status EQUAL 0) AND NOT (rc EQUAL 0))
    string(APPEND failures "\n  ${name}: failed: ${out}")
  elseif(NOT (status EQUAL 0) AND (rc EQUAL 0))
    string(APPEND failures "\n  ${name}: passed, expected to fail")
  elseif(NOT out MATCHES "${message}")
    string(APPEND failures "\n  ${name}: '${message}' not in: ${out}")
  endif()
  set(failures "${failures}" PARENT_SCOPE)
endfunction()
set(h "${wheel}/include/torch/headeronly/version.h")
expect(wheel 0 ""
       HEADERS "${wheel}/include" LIBRARIES "${wheel}/lib/libtorch_cpu.so;${wheel}/lib/libc10.so"
       PYTHON 2.15.0+cu130)
expect(debian 0 ""
       HEADERS "${debian}/include" LIBRARIES "${debian}/lib/libtorch_cpu.so" PYTHON 1.13.0a0)
expect(wheel_headers_debian_library 1
       "headers 2.15.0 \\(${h}\\) and torch library 1.13.0 \\(${debian}/lib/libtorch_cpu.so\\)"
       HEADERS "${wheel}/include" LIBRARIES "${wheel}/lib/libc10.so;${debian}/lib/libtorch_cpu.so")
expect(other_interpreter 1 "torch headers 2.15.0 \\(${h}\\) and the torch 2.13.0\\+cu130"
       HEADERS "${wheel}/include" LIBRARIES "${wheel}/lib/libc10.so" PYTHON 2.13.0+cu130)
expect(no_headers 1 "no torch/version.h" HEADERS "${debian}/lib" LIBRARIES "")
if(failures)
  message(FATAL_ERROR "torch version checks:${failures}")
endif()
message(STATUS "torch version checks: 5 cases as expected")
