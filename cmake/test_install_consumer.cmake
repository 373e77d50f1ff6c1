# ctest driver: installs the build tree into a temporary prefix, then configures, builds and runs
# examples/consumer, examples/decode_step and the README's C++ quick start against it through
# find_package(dsv4cpu).
# Inputs: BUILD_DIR, SOURCE_DIR, WORK_DIR.
file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")
function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "command failed (${rc}): ${ARGV}\n${out}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()
run(${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${prefix}")
run(${CMAKE_COMMAND} -S "${SOURCE_DIR}/examples/consumer" -B "${WORK_DIR}/build"
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build "${WORK_DIR}/build")
run("${WORK_DIR}/build/consumer")
string(STRIP "${last_output}" last_output)
set(expected "^dsv4cpu [0-9]+\\.[0-9]+\\.[0-9]+ \\(headers [0-9.]+\\)\n.*\n")
string(APPEND expected "caught ValueError on block_size: [^\n]*\nok$")
if(NOT last_output MATCHES "${expected}")
  message(FATAL_ERROR "consumer printed '${last_output}'")
endif()
message(STATUS "consumer:\n${last_output}")

# One C4A layer step at a context long enough for the indexer to compute logits and select.
run(${CMAKE_COMMAND} -S "${SOURCE_DIR}/examples/decode_step" -B "${WORK_DIR}/decode_step"
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build "${WORK_DIR}/decode_step")
run("${WORK_DIR}/decode_step/decode_step" --batch 3 --context 3000 --steps 1)
set(expected "indexer: fp8_paged_mqa_logits.*time per step: .*sparse_mla_attention .*all finite")
if(NOT last_output MATCHES "${expected}")
  message(FATAL_ERROR "decode_step printed '${last_output}'")
endif()
message(STATUS "decode_step:\n${last_output}")

# The README's C++ quick start: its first ```cpp block, built against the installed package.
file(READ "${SOURCE_DIR}/README.md" readme)
string(REGEX MATCH "```cpp\n([^`]*)```" block "${readme}")
if(NOT block)
  message(FATAL_ERROR "README.md: no ```cpp block")
endif()
file(WRITE "${WORK_DIR}/quickstart/main.cpp" "${CMAKE_MATCH_1}")
file(WRITE "${WORK_DIR}/quickstart/CMakeLists.txt" [=[
cmake_minimum_required(VERSION 3.25)
project(quickstart LANGUAGES CXX)
find_package(dsv4cpu REQUIRED)
add_executable(quickstart main.cpp)
target_compile_features(quickstart PRIVATE cxx_std_17)
target_compile_options(quickstart PRIVATE -Wall -Wextra -Wconversion -Werror)
target_link_libraries(quickstart PRIVATE dsv4cpu::dsv4cpu)
]=])
run(${CMAKE_COMMAND} -S "${WORK_DIR}/quickstart" -B "${WORK_DIR}/quickstart/build"
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build "${WORK_DIR}/quickstart/build")
run("${WORK_DIR}/quickstart/build/quickstart")
if(NOT last_output MATCHES "^dsv4cpu [0-9]+\\.[0-9]+\\.[0-9]+: 9 13\n$")
  message(FATAL_ERROR "README quick start printed '${last_output}'")
endif()
message(STATUS "README quick start: ${last_output}")
