# Runs dsv4cpu-verify with ARGS (a list) and checks its exit status and the last line of stdout.
# cmake -DVERIFY=... -DARGS=... -DEXPECT_STATUS=... -DEXPECT_LAST_LINE=... -P check_cli.cmake
execute_process(COMMAND ${VERIFY} ${ARGS} RESULT_VARIABLE status OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
message("${out}${err}")
string(STRIP "${out}" out)
string(REGEX REPLACE ".*\n" "" last "${out}")
if(NOT status STREQUAL EXPECT_STATUS)
  message(FATAL_ERROR "exit status ${status}, expected ${EXPECT_STATUS}")
endif()
if(NOT last STREQUAL EXPECT_LAST_LINE)
  message(FATAL_ERROR "last line '${last}', expected '${EXPECT_LAST_LINE}'")
endif()
