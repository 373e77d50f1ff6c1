# The project's `find_package(Torch)` (python/CMakeLists.txt makes this folder the default
# Torch_DIR): the imported target `torch` from the headers and the CPU libraries of the torch that
# DSV4CPU_PYTHON imports, a pip wheel or Debian's python3-torch. Consumers compile with that torch's
# C++ standard (the C++ standard its own CMake package sets, never below the project's 17) and its
# _GLIBCXX_USE_CXX11_ABI. Needs no CUDA toolkit: a wheel's own TorchConfig.cmake asks for the one
# it was built with, and its find_package(Caffe2) finds another torch of the machine (Debian's)
# before its own.
if(NOT DSV4CPU_PYTHON)
  message(FATAL_ERROR "cmake/torch-cpu: set DSV4CPU_PYTHON to the Python whose torch to use")
endif()
set(torch_query "import os, torch, torch.utils; print(os.path.dirname(torch.__file__), \
int(torch._C._GLIBCXX_USE_CXX11_ABI), torch.__version__, torch.utils.cmake_prefix_path, sep=';')")
execute_process(COMMAND ${DSV4CPU_PYTHON} -c "${torch_query}"
  OUTPUT_VARIABLE torch_info OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE torch_status
  ERROR_QUIET)
if(NOT torch_status EQUAL 0)
  set(Torch_FOUND FALSE)
  return()
endif()
list(GET torch_info 0 torch_root)
list(GET torch_info 1 torch_abi)
list(GET torch_info 2 Torch_VERSION)
list(GET torch_info 3 torch_cmake_dir)

# The standard torch's own package asks of its consumers: `CXX_STANDARD 20` or
# `target_compile_features(torch INTERFACE cxx_std_20)` in its TorchConfig.cmake.
set(torch_cxx_standard 17)
if(EXISTS "${torch_cmake_dir}/Torch/TorchConfig.cmake")
  file(STRINGS "${torch_cmake_dir}/Torch/TorchConfig.cmake" torch_standards
       REGEX "CXX_STANDARD [0-9]+|cxx_std_[0-9]+")
  foreach(line IN LISTS torch_standards)
    string(REGEX MATCH "[0-9]+" standard "${line}")
    if(standard GREATER torch_cxx_standard)
      set(torch_cxx_standard ${standard})
    endif()
  endforeach()
endif()

set(TORCH_CXX_FLAGS "-D_GLIBCXX_USE_CXX11_ABI=${torch_abi}")
set(TORCH_INCLUDE_DIRS "${torch_root}/include" "${torch_root}/include/torch/csrc/api/include")
set(TORCH_LIBRARIES "${torch_root}/lib/libtorch.so" "${torch_root}/lib/libtorch_cpu.so"
                    "${torch_root}/lib/libc10.so")
if(NOT TARGET torch)
  add_library(torch INTERFACE IMPORTED)
  set_target_properties(torch PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${TORCH_INCLUDE_DIRS}"
    INTERFACE_COMPILE_DEFINITIONS "_GLIBCXX_USE_CXX11_ABI=${torch_abi}"
    INTERFACE_COMPILE_FEATURES "cxx_std_${torch_cxx_standard}"
    INTERFACE_LINK_LIBRARIES "${TORCH_LIBRARIES}")
endif()
set(Torch_FOUND TRUE)
message(STATUS "torch ${Torch_VERSION} (CPU libraries, C++${torch_cxx_standard}) in ${torch_root}")
