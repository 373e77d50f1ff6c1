# Runs dsv4cpu-verify with ARGS (a list) and checks its exit status and the last line of stdout,
# and that stdout holds each text of EXPECT_TEXTS and none of REJECT_TEXTS (optional lists).
# cmake -DVERIFY=... -DARGS=... -DEXPECT_STATUS=... -DEXPECT_LAST_LINE=...
#       [-DEXPECT_TEXTS=...] [-DREJECT_TEXTS=...] -P check_cli.cmake
execute_process(COMMAND ${VERIFY} ${ARGS} RESULT_VARIABLE status OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
message("${out}${err}")
foreach(text IN LISTS EXPECT_TEXTS)
  string(FIND "${out}" "${text}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "no '${text}' in the output")
  endif()
endforeach()
foreach(text IN LISTS REJECT_TEXTS)
  string(FIND "${out}" "${text}" at)
  if(NOT at EQUAL -1)
    message(FATAL_ERROR "'${text}' in the output")
  endif()
endforeach()
string(STRIP "${out}" out)
string(REGEX REPLACE ".*\n" "" last "${out}")
if(NOT status STREQUAL EXPECT_STATUS)
  message(FATAL_ERROR "exit status ${status}, expected ${EXPECT_STATUS}")
endif()
if(NOT last STREQUAL EXPECT_LAST_LINE)
  message(FATAL_ERROR "last line '${last}', expected '${EXPECT_LAST_LINE}'")
endif()
