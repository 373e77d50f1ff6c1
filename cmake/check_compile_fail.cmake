# ctest driver: compiles SOURCE (syntax only) with the public headers in INCLUDES, first without a
# case macro (the control, which must compile), then once per CASES entry "MACRO=REGEX": the
# compiler must reject the source with MACRO defined and its diagnostic must match REGEX.
# Inputs: CXX, SOURCE, INCLUDES (;-list), CASES (;-list).
set(flags -std=c++17 -fsyntax-only -Wall -Wextra -Werror)
foreach(dir ${INCLUDES})
  list(APPEND flags "-I${dir}")
endforeach()
execute_process(COMMAND ${CXX} ${flags} ${SOURCE} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the control does not compile:\n${out}")
endif()
foreach(case ${CASES})
  string(REGEX MATCH "^([^=]+)=(.*)$" _ "${case}")
  set(macro "${CMAKE_MATCH_1}")
  set(regex "${CMAKE_MATCH_2}")
  execute_process(COMMAND ${CXX} ${flags} -D${macro} ${SOURCE} RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(rc EQUAL 0)
    message(FATAL_ERROR "${macro}: compiled, but must be rejected")
  endif()
  if(NOT out MATCHES "${regex}")
    message(FATAL_ERROR "${macro}: rejected, but the diagnostic does not match '${regex}':\n${out}")
  endif()
  message(STATUS "${macro}: rejected as expected")
endforeach()
