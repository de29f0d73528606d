# How ctest runs the GoogleTest binaries. By default each test is its own
# process (gtest_discover_tests): a crash or a leak names its test. The
# sanitizer build (scripts/configure-sanitizers.sh) runs each binary as
# GPIPE_TEST_SHARDS processes instead (GoogleTest's own sharding): under ASan
# a process costs 0.12 s to start and to check for leaks at exit, 155 s of
# the runtime tests' 425 when each of their 1292 tests was one. A report still
# fails its shard, and ASan's and LeakSanitizer's stacks name the code.
include(GoogleTest)

set(GPIPE_TEST_SHARDS 0 CACHE STRING
  "Run each GoogleTest binary as this many ctest tests, one process each (0: one process per test)")

# Registers the GoogleTest binary `target` with ctest; the arguments after it
# are gtest_discover_tests's (PROPERTIES is honoured when sharded too).
function(gpipe_discover_tests target)
  if(NOT GPIPE_TEST_SHARDS GREATER 0)
    gtest_discover_tests(${target} ${ARGN})
    return()
  endif()
  cmake_parse_arguments(ARG "" "" "PROPERTIES" ${ARGN})
  math(EXPR last "${GPIPE_TEST_SHARDS} - 1")
  foreach(shard RANGE ${last})
    set(name ${target}.shard${shard})
    add_test(NAME ${name} COMMAND ${target})
    set_tests_properties(${name} PROPERTIES ENVIRONMENT
      "GTEST_TOTAL_SHARDS=${GPIPE_TEST_SHARDS};GTEST_SHARD_INDEX=${shard}")
    if(ARG_PROPERTIES)
      set_tests_properties(${name} PROPERTIES ${ARG_PROPERTIES})
    endif()
  endforeach()
endfunction()
