# dsv4cpu_check_torch_versions(HEADERS <include dirs> LIBRARIES <files> [PYTHON <version>]):
# fails the configure, naming both, when the version of the torch headers (torch/version.h under
# HEADERS) differs from that of a torch library of LIBRARIES or from the torch of the interpreter
# (PYTHON, torch.__version__). Compiled against one torch and linked against another (a wheel's
# headers with Debian's libtorch_cpu.so.1.13), a module builds but does not import.
# A library's version: its real file name (libtorch_cpu.so.1.13.0), else the torch package around
# it (<torch>/lib/libtorch_cpu.so beside <torch>/version.py; a libtorch archive's build-version).
function(dsv4cpu_torch_library_version library out)
  file(REAL_PATH "${library}" real)
  get_filename_component(dir "${real}" DIRECTORY)
  set(version "")
  if(real MATCHES "\\.so\\.([0-9]+(\\.[0-9]+)*)$")
    set(version ${CMAKE_MATCH_1})
  elseif(EXISTS "${dir}/../version.py")
    file(STRINGS "${dir}/../version.py" line REGEX "^__version__ *=")
    if(line MATCHES "['\"]([0-9]+\\.[0-9]+\\.[0-9]+)")
      set(version ${CMAKE_MATCH_1})
    endif()
  elseif(EXISTS "${dir}/../build-version")
    file(STRINGS "${dir}/../build-version" line REGEX "^[0-9]+\\.[0-9]+\\.[0-9]+")
    if(line MATCHES "^([0-9]+\\.[0-9]+\\.[0-9]+)")
      set(version ${CMAKE_MATCH_1})
    endif()
  endif()
  set(${out} "${version}" PARENT_SCOPE)
endfunction()

# True when the shorter of two dotted versions is a prefix of the longer (1.13 matches 1.13.0).
function(dsv4cpu_torch_versions_agree a b out)
  string(REPLACE "." ";" a_parts "${a}")
  string(REPLACE "." ";" b_parts "${b}")
  list(LENGTH a_parts a_length)
  list(LENGTH b_parts b_length)
  if(a_length LESS b_length)
    list(SUBLIST b_parts 0 ${a_length} b_parts)
  else()
    list(SUBLIST a_parts 0 ${b_length} a_parts)
  endif()
  if(a_parts STREQUAL b_parts)
    set(${out} TRUE PARENT_SCOPE)
  else()
    set(${out} FALSE PARENT_SCOPE)
  endif()
endfunction()

function(dsv4cpu_check_torch_versions)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "PYTHON" "HEADERS;LIBRARIES")
  set(header_version "")
  foreach(dir IN LISTS arg_HEADERS)
    foreach(name torch/headeronly/version.h torch/version.h)
      if(header_version STREQUAL "" AND EXISTS "${dir}/${name}")
        file(STRINGS "${dir}/${name}" defines REGEX "#define TORCH_VERSION_(MAJOR|MINOR|PATCH) ")
        if(defines MATCHES "MAJOR ([0-9]+).*MINOR ([0-9]+).*PATCH ([0-9]+)")
          set(header_version "${CMAKE_MATCH_1}.${CMAKE_MATCH_2}.${CMAKE_MATCH_3}")
          set(header_file "${dir}/${name}")
        endif()
      endif()
    endforeach()
  endforeach()
  if(header_version STREQUAL "")
    message(FATAL_ERROR "torch headers: no torch/version.h with TORCH_VERSION_MAJOR in "
                        "${arg_HEADERS}")
  endif()
  foreach(library IN LISTS arg_LIBRARIES)
    dsv4cpu_torch_library_version("${library}" library_version)
    if(library_version STREQUAL "")
      message(WARNING "torch library ${library}: its version is unknown, not compared with the "
                      "headers' ${header_version}")
      continue()
    endif()
    dsv4cpu_torch_versions_agree("${header_version}" "${library_version}" agree)
    if(NOT agree)
      message(FATAL_ERROR "torch headers ${header_version} (${header_file}) and torch library "
                          "${library_version} (${library}) differ: a module built with both does "
                          "not import. Use one torch for both (the default Torch_DIR, "
                          "cmake/torch-cpu, takes both from DSV4CPU_PYTHON's torch).")
    endif()
  endforeach()
  if(arg_PYTHON MATCHES "^([0-9]+\\.[0-9]+\\.[0-9]+)")
    dsv4cpu_torch_versions_agree("${header_version}" "${CMAKE_MATCH_1}" agree)
    if(NOT agree)
      message(FATAL_ERROR "torch headers ${header_version} (${header_file}) and the torch "
                          "${arg_PYTHON} of DSV4CPU_PYTHON differ: the module would not import "
                          "there. Set DSV4CPU_PYTHON to a Python with torch ${header_version}.")
    endif()
  endif()
endfunction()
