# Profile-guided optimisation of the release build (scripts/build --release).
#
#   HENGSHI_PGO      empty (none), "generate" or "use"
#   HENGSHI_PGO_DIR  where a "generate" build's binaries write their profile, and a "use" build reads it
#
# The request path is a long chain of short functions across a dozen libraries (parse, auth, PII,
# router, chain, upstream, metrics, answer); GCC's static guesses inline and lay it out poorly. A
# profile of the real path (scripts/pgo-train drives it) tells GCC which branches and calls are hot:
# 0.95-0.96x the normal build's CPU per proxied request at c=64 on the Intel 2-core machine
# (DESIGN-NOTES "Hot path"). Code the training never ran keeps the normal -O2 code (-fprofile-partial-training), so
# the edge engines and rare paths are not slowed by being "cold".
# -fprofile-prefix-path: profile files are named by object paths relative to the build folder, so the
# "use" build (another folder) finds the "generate" build's profile.
set(HENGSHI_PGO "" CACHE STRING "Profile-guided optimisation: empty, generate or use")
set(HENGSHI_PGO_DIR "" CACHE PATH "The profile's folder (HENGSHI_PGO)")
# The libraries a proxied request runs through, and the commands (serve's event loop: Asio's
# scheduler is compiled into whichever object the linker keeps a copy from). The edge engines are
# compiled as in the normal build, so they come from ccache and the release build compiles less.
set(HENGSHI_PGO_LIBRARIES hengshi_core hengshi_obs hengshi_cloud hengshi_cache hengshi_router
                          hengshi_chain hengshi_server hengshi_cli)
set(_hengshi_pgo_flags)
if(HENGSHI_PGO)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    message(FATAL_ERROR "HENGSHI_PGO: the release build's profile flags are GCC's")
  endif()
  if(NOT HENGSHI_PGO_DIR)
    message(FATAL_ERROR "HENGSHI_PGO needs HENGSHI_PGO_DIR")
  endif()
  if(HENGSHI_PGO STREQUAL "generate")
    # Atomic counters: the gateway's threads (log writer, llama workers) update them concurrently.
    set(_hengshi_pgo_flags -fprofile-generate=${HENGSHI_PGO_DIR} -fprofile-update=atomic
                           -fprofile-prefix-path=${CMAKE_BINARY_DIR})
    add_link_options(-fprofile-generate=${HENGSHI_PGO_DIR})
  elseif(HENGSHI_PGO STREQUAL "use")
    # -fprofile-correction: counters of a multithreaded run can be slightly inconsistent.
    # -Wno-coverage-mismatch: a source generated into the build folder (the dashboard page) is
    # recorded under the training build's path; GCC then goes without that function's profile.
    set(_hengshi_pgo_flags -fprofile-use=${HENGSHI_PGO_DIR} -fprofile-partial-training -fprofile-correction
                           -fprofile-prefix-path=${CMAKE_BINARY_DIR} -Wno-missing-profile -Wno-coverage-mismatch)
  else()
    message(FATAL_ERROR "HENGSHI_PGO is \"${HENGSHI_PGO}\": empty, generate or use")
  endif()
  # GCC's flow analysis sees the profile's inlining and reports uninitialised reads that are not
  # there (std::optional in obs/replay.cc, GCC 12); the normal build keeps the warning.
  list(APPEND _hengshi_pgo_flags -Wno-maybe-uninitialized)
  message(STATUS "hengshi: profile-guided optimisation, ${HENGSHI_PGO} (${HENGSHI_PGO_DIR})")
endif()

# Called by hengshi_library() for each library.
function(hengshi_pgo target)
  if(_hengshi_pgo_flags AND target IN_LIST HENGSHI_PGO_LIBRARIES)
    target_compile_options(${target} PRIVATE ${_hengshi_pgo_flags})
    # An object built by a profile is only as good as that profile, which each training rewrites:
    # ccache would hand back one built by an older profile.
    if(HENGSHI_PGO STREQUAL "use")
      set_target_properties(${target} PROPERTIES CXX_COMPILER_LAUNCHER "")
    endif()
    # These libraries are compiled twice per release build (instrumented, then with the profile),
    # on a cold machine from scratch: unity batches parse Asio, Beast and nlohmann once per eight
    # sources, as the sanitizer build does. Both builds batch alike: the profile's files match.
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
    # A coroutine frame holding a file-local type "has no linkage" once its file is included in a
    # batch; each batch is one translation unit, so nothing is shared across units (a false alarm).
    target_compile_options(${target} PRIVATE -Wno-subobject-linkage)
  endif()
endfunction()
