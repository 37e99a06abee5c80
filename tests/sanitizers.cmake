# Sanitizer builds (CMakePresets.json: asan-ubsan, tsan; tools/dev/sanitize_tests.sh runs them),
# included from tests/CMakeLists.txt. Nothing happens in a build without -fsanitize.
#
# A Python-hosted test (one whose ENVIRONMENT sets THREELC_LIBRARY: the pytest suites and the
# threelcrun / torchrun jobs) loads the sanitized libthreelc.so into /usr/bin/python3, which is
# not built with the sanitizer, and the sanitizer's runtime must be the first library of the
# process: it is preloaded (LD_PRELOAD, inherited by every rank the test starts). Under ASan,
# LeakSanitizer is off in those tests: CPython, numpy and torch keep memory to the end of the
# process by design, and a suppression of their frames would hide our allocations made under
# a ctypes call too. The C++ test binaries and probes, which link the same engine, transport
# and codec code, keep leak detection.
set(threelc_sanitizer_runtime "")
if(CMAKE_CXX_FLAGS MATCHES "-fsanitize=[^ ]*address")
  set(threelc_sanitizer_runtime libasan.so)
elseif(CMAKE_CXX_FLAGS MATCHES "-fsanitize=[^ ]*thread")
  set(threelc_sanitizer_runtime libtsan.so)
endif()
if(threelc_sanitizer_runtime)
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=${threelc_sanitizer_runtime}
                  OUTPUT_VARIABLE THREELC_SANITIZER_PRELOAD OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(threelc_sanitizer_runtime STREQUAL "libasan.so")
    # libstdc++ too, behind it: ASan finds the __cxa_throw it wraps when it starts, and Python
    # loads libstdc++ only later (with torch or libthreelc.so), so the first C++ exception
    # would fail its check "real___cxa_throw != 0" and abort the rank.
    execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libstdc++.so
                    OUTPUT_VARIABLE libstdcxx OUTPUT_STRIP_TRAILING_WHITESPACE)
    string(APPEND THREELC_SANITIZER_PRELOAD ":${libstdcxx}")
  else()
    # TSan: and a library that initialises the runtime before main (tests/support/
    # tsan_init_at_load.c): without it every shell started with libtsan preloaded crashes.
    add_library(tsan_init_at_load SHARED ${CMAKE_CURRENT_SOURCE_DIR}/support/tsan_init_at_load.c)
    set_target_properties(tsan_init_at_load PROPERTIES LIBRARY_OUTPUT_DIRECTORY
                          ${CMAKE_BINARY_DIR}/lib)
    string(APPEND THREELC_SANITIZER_PRELOAD ":${CMAKE_BINARY_DIR}/lib/libtsan_init_at_load.so")
  endif()
  message(STATUS "threelc: sanitizer build: Python-hosted tests preload "
                 "${THREELC_SANITIZER_PRELOAD}")
  # The sanitizers slow a process down 2-15x (TSan the most), and the CPUs are shared by the
  # ranks of a job: the TIMEOUT of every test added here (the pytest suites and jobs; the
  # GoogleTest cases keep theirs) is multiplied by this factor, and so are the hard timeouts of
  # the jobs that tests/engine/jobs, tests/engine/soak and tests/tools/eval start
  # (THREELC_TEST_TIMEOUT_SCALE, read in tests/support/sanitized_ranks.py and applied by
  # tests/support/rank_jobs.py).
  # Under ASan, numpy-heavy Python ranks run 20-30x slower than in the Release build (one
  # 3-rank error_feedback job: 42 s against 1.4 s on 2 cores): every array of more than 128 KiB
  # is mmap'd and unmapped by ASan's allocator, and its shadow too, so that about half of the
  # time is page faults and TLB flushes in the kernel. engine_job_tests alone then takes about
  # 11 minutes, during which ctest prints nothing (no hang: its TIMEOUT here is 1800 s).
  set(THREELC_SANITIZER_TIMEOUT_FACTOR 3 CACHE STRING
      "Factor of the tests' TIMEOUT in a sanitizer build")
  # Deferred to the end of tests/CMakeLists.txt, so that it sees every test added there.
  function(threelc_sanitize_tests)
    get_property(tests DIRECTORY PROPERTY TESTS)
    foreach(test IN LISTS tests)
      get_test_property(${test} TIMEOUT timeout)
      if(timeout)
        math(EXPR timeout "${timeout} * ${THREELC_SANITIZER_TIMEOUT_FACTOR}")
        set_tests_properties(${test} PROPERTIES TIMEOUT ${timeout})
      endif()
      get_test_property(${test} ENVIRONMENT env)
      if(NOT env MATCHES "THREELC_LIBRARY=")
        continue()
      endif()
      # Label python-hosted: `-LE python-hosted` leaves them out (CI's ASan subset does).
      set_property(TEST ${test} APPEND PROPERTY LABELS python-hosted)
      set_property(TEST ${test} APPEND PROPERTY ENVIRONMENT_MODIFICATION
                   "LD_PRELOAD=path_list_prepend:${THREELC_SANITIZER_PRELOAD}")
      set_property(TEST ${test} APPEND PROPERTY ENVIRONMENT_MODIFICATION
                   "THREELC_TEST_TIMEOUT_SCALE=set:${THREELC_SANITIZER_TIMEOUT_FACTOR}")
      if(threelc_sanitizer_runtime STREQUAL "libasan.so")
        # Later ASan flags override earlier ones: this one wins over the caller's.
        set_property(TEST ${test} APPEND PROPERTY ENVIRONMENT_MODIFICATION
                     "ASAN_OPTIONS=string_append::detect_leaks=0")
      endif()
    endforeach()
  endfunction()
  cmake_language(DEFER CALL threelc_sanitize_tests)
endif()
