# Sanitizer build of hengshi's own targets (scripts/test-sanitize).
#
#   HENGSHI_SANITIZE  comma-separated -fsanitize= list, e.g. "address,undefined"; empty = none
#
# Applied with add_compile_options/add_link_options before the source folders are added, so every
# target this project defines (libraries, binaries, tests, benchmarks) is instrumented. Dependencies
# are prebuilt system packages (and llama.cpp an imported prefix), so none of them is touched; the
# sanitizer build is meant to be configured with -DHENGSHI_WITH_LLAMA=OFF.
# -fno-sanitize-recover=all: an undefined-behaviour report aborts like an ASan one, so any report
# fails the process that hit it (and through it the test) instead of scrolling past.
set(HENGSHI_SANITIZE "" CACHE STRING "Comma-separated -fsanitize= list for hengshi's targets (empty: none)")
if(HENGSHI_SANITIZE)
  set(_hengshi_sanitize_flags -fsanitize=${HENGSHI_SANITIZE} -fno-omit-frame-pointer
                              -fno-sanitize-recover=all)
  add_compile_options(${_hengshi_sanitize_flags})
  # GCC's flow analysis sees the instrumented code and reports uninitialised reads that are not
  # there (libstdc++'s <regex> at -O1, GCC 12); the normal build keeps the warning.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    add_compile_options(-Wno-maybe-uninitialized)
  endif()
  add_link_options(-fsanitize=${HENGSHI_SANITIZE})
  # Executables not position-independent: an instrumented test binary holds about two million
  # relative relocations (ASan's descriptor of every global among them), and applying them at
  # each start cost more than half of the 0.3 s a test process took to start. ctest starts one
  # process per test, about a thousand of them.
  add_link_options($<$<STREQUAL:$<TARGET_PROPERTY:TYPE>,EXECUTABLE>:-no-pie>)
  message(STATUS "hengshi: sanitizers ${HENGSHI_SANITIZE}")
endif()
