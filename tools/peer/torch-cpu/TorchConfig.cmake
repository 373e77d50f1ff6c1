# A CPU-only `find_package(Torch)` for a pip-installed torch (ci/peer.sh): the imported target
# `torch` from the headers and the CPU libraries of the torch that DSV4CPU_PYTHON imports. The
# wheel's own TorchConfig.cmake wants the CUDA toolkit its build used; the extension needs none of
# it. Use with -DTorch_DIR=<this folder> -DDSV4CPU_PYTHON=<venv>/bin/python.
if(NOT DSV4CPU_PYTHON)
  message(FATAL_ERROR "tools/peer/torch-cpu: set DSV4CPU_PYTHON to the Python whose torch to use")
endif()
set(torch_query "import os, torch; print(os.path.dirname(torch.__file__), \
int(torch._C._GLIBCXX_USE_CXX11_ABI), torch.__version__, sep=';')")
execute_process(COMMAND ${DSV4CPU_PYTHON} -c "${torch_query}"
  OUTPUT_VARIABLE torch_info OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE torch_status)
if(NOT torch_status EQUAL 0)
  set(Torch_FOUND FALSE)
  return()
endif()
list(GET torch_info 0 torch_root)
list(GET torch_info 1 torch_abi)
list(GET torch_info 2 Torch_VERSION)
set(TORCH_CXX_FLAGS "-D_GLIBCXX_USE_CXX11_ABI=${torch_abi}")
if(NOT TARGET torch)
  add_library(torch INTERFACE IMPORTED)
  set_target_properties(torch PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES
      "${torch_root}/include;${torch_root}/include/torch/csrc/api/include"
    INTERFACE_COMPILE_DEFINITIONS "_GLIBCXX_USE_CXX11_ABI=${torch_abi}"
    INTERFACE_LINK_LIBRARIES
      "${torch_root}/lib/libtorch.so;${torch_root}/lib/libtorch_cpu.so;${torch_root}/lib/libc10.so"
    INTERFACE_LINK_OPTIONS "LINKER:-rpath,${torch_root}/lib")
endif()
set(Torch_FOUND TRUE)
message(STATUS "torch ${Torch_VERSION} (CPU libraries) in ${torch_root}")
