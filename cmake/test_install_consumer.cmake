# ctest driver: installs the build tree into a temporary prefix, then configures, builds and runs
# examples/consumer against it through find_package(dsv4cpu).
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
