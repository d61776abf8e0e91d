# SINEW_SANITIZE and SINEW_FUZZ (declared in the top-level CMakeLists.txt; docs/fuzzing.md).
# Both add their flags to every target of the project (generated code too), so that the
# libraries the tests and fuzz targets call are instrumented. Libraries from Debian
# (RocksDB, gRPC, protobuf, Boost) are not.
if(SINEW_SANITIZE AND SINEW_FUZZ)
  message(FATAL_ERROR "SINEW_SANITIZE and SINEW_FUZZ are separate builds: choose one")
endif()

if(SINEW_SANITIZE STREQUAL "address")
  set(sinew_sanitize_flags -fsanitize=address,undefined)
elseif(SINEW_SANITIZE STREQUAL "undefined")
  set(sinew_sanitize_flags -fsanitize=undefined)
elseif(SINEW_SANITIZE STREQUAL "thread")
  set(sinew_sanitize_flags -fsanitize=thread)
elseif(SINEW_SANITIZE)
  message(FATAL_ERROR "SINEW_SANITIZE must be address, undefined, thread or empty (got '${SINEW_SANITIZE}')")
endif()
if(sinew_sanitize_flags)
  # A finding stops the process (and fails its test) instead of printing and going on.
  add_compile_options(${sinew_sanitize_flags} -fno-sanitize-recover=all -fno-omit-frame-pointer)
  add_link_options(${sinew_sanitize_flags})
  message(STATUS "Sinew sanitizers: ${sinew_sanitize_flags}")
endif()

if(SINEW_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "SINEW_FUZZ needs clang (libFuzzer): CXX=clang++-14 (scripts/fuzz.sh does this)")
  endif()
  # Libraries: coverage for libFuzzer plus ASan+UBSan; the fuzz targets add -fsanitize=fuzzer
  # when linking (fuzz/CMakeLists.txt). Other executables link without libFuzzer's main.
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all
                      -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
  enable_testing()  # ctest -L fuzz (fuzz/CMakeLists.txt), also without SINEW_BUILD_TESTS
  message(STATUS "Sinew fuzz build: libFuzzer + ASan + UBSan")
endif()

# The in-container agent (sinew-sandbox-agent) is linked statically, which the sanitizer
# runtimes do not support; sandbox-agent/CMakeLists.txt reads this to build it without them.
if(sinew_sanitize_flags OR SINEW_FUZZ)
  set(SINEW_INSTRUMENTED ON)
else()
  set(SINEW_INSTRUMENTED OFF)
endif()

# Per-file options a sanitizer build needs under SINEW_WERROR with g++, called by the
# top-level CMakeLists.txt once every role is added:
# - thread: g++ warns (-Wtsan) that TSan does not model the std::atomic_thread_fence
#   Boost.Asio uses; the files that include Boost.Asio get -Wno-tsan (a race ordered only by
#   such a fence could be reported falsely there; none has been).
# - address: g++ 12 warns -Wmaybe-uninitialized inside libstdc++'s <regex> automaton
#   (std::function moved in _NFA::_M_insert_subexpr_end) and inside cpptoml's option<bool>
#   once ASan instruments them, false positives in those headers; the files that include
#   <regex> or cpptoml.h get -Wno-maybe-uninitialized.
function(sinew_sanitizer_source_options)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    return()
  endif()
  if(SINEW_SANITIZE STREQUAL "thread")
    set(option -Wno-tsan)
    set(files harness:src/http_server.cc harness/tests:test_util.cc model-backend/src/server:http_server.cc)
  elseif(SINEW_SANITIZE STREQUAL "address")
    set(option -Wno-maybe-uninitialized)
    set(files common:src/log_test.cc cli/tests:cli_remote_test.cc eval:src/resource_config.cc
              sandbox-agent/src/sandboxd:resources.cc sandbox-agent/src/sandboxd:host_registration.cc
              sandbox-agent:tests/hardening_test.cc eval:src/task.cc)
  else()
    return()
  endif()
  # Each entry: the directory whose CMakeLists.txt adds the file, then the file from there.
  foreach(pair ${files})
    string(REPLACE ":" ";" parts ${pair})
    list(GET parts 0 dir)
    list(GET parts 1 file)
    if(dir MATCHES "(^|/)tests$" AND NOT SINEW_BUILD_TESTS)
      continue()  # CMake refuses a DIRECTORY it has not processed
    endif()
    if(EXISTS ${PROJECT_SOURCE_DIR}/${dir}/${file})
      set_source_files_properties(${PROJECT_SOURCE_DIR}/${dir}/${file} DIRECTORY ${PROJECT_SOURCE_DIR}/${dir}
                                  PROPERTIES COMPILE_OPTIONS ${option})
    endif()
  endforeach()
endfunction()
