# Writes one ctest entry per GoogleTest suite of the test program (CMakeLists.txt here says why),
# run after each link of the program:
#   cmake -D TEST_PROGRAM=<linea_tests> -D OUTPUT=<file> -P discover_suites.cmake
# The program lists its tests (`--gtest_list_tests`: a suite's name at the start of a line, ending
# in '.', maybe followed by "  # TypeParam = ..."; its tests indented below it), and each entry
# runs one suite through `--gtest_filter=Suite.*`. Suites named DISABLED_ run nothing and get none.
execute_process(COMMAND "${TEST_PROGRAM}" --gtest_list_tests
                OUTPUT_VARIABLE listing ERROR_VARIABLE errors RESULT_VARIABLE status TIMEOUT 120)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "listing the tests of ${TEST_PROGRAM} failed (${status}):\n${listing}${errors}")
endif()
# Matched in the whole text, not split into lines: a test's parameter, printed after it, may hold
# brackets or semicolons, which a CMake list would not keep apart.
string(REGEX MATCHALL "\n[A-Za-z0-9_/]+\\." suite_lines "\n${listing}")
set(entries "")
set(count 0)
foreach(suite_line IN LISTS suite_lines)
  string(STRIP "${suite_line}" suite)
  string(REGEX REPLACE "\\.$" "" suite "${suite}")
  if(NOT suite MATCHES "^DISABLED_")
    string(APPEND entries
           "add_test([==[${suite}]==] [==[${TEST_PROGRAM}]==] [==[--gtest_filter=${suite}.*]==])\n"
           "set_tests_properties([==[${suite}]==] PROPERTIES ENVIRONMENT LINEA_NUM_THREADS=2\n"
           "  SKIP_REGULAR_EXPRESSION [==[\\[linea\\] every test of this run skipped]==])\n")
    math(EXPR count "${count} + 1")
  endif()
endforeach()
if(count EQUAL 0)
  message(FATAL_ERROR "${TEST_PROGRAM} listed no test suites:\n${listing}")
endif()
file(WRITE "${OUTPUT}" "# Written by discover_suites.cmake: ${count} suites of ${TEST_PROGRAM}.\n${entries}")
