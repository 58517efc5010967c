# The pinned llama.cpp that scripts/fetch-llama builds into a cache folder outside the source
# tree (DESIGN.md §5). Defines hengshi::llama (libllama + CPU ggml) and the paths the edge LLM's
# tests and benchmark need: the llama.cpp source (its models/ggml-vocab-*.gguf) and llama-bench
# (built only by `scripts/fetch-llama --bench`).
#
#   HENGSHI_WITH_LLAMA      OFF builds the gateway without the edge LLM
#   HENGSHI_LLAMA_PREFIX    install prefix printed by scripts/fetch-llama; empty = the default
#                           cache, ${HENGSHI_CACHE_DIR:-$HOME/.cache/hengshi}/llama.cpp-<ver>/install
#   HENGSHI_LLAMA_VOCAB_DIR vocabulary GGUFs for the test model; default <prefix>/../src/models
# Sets HENGSHI_LLAMA_FOUND (ON when hengshi::llama exists).
if(NOT HENGSHI_WITH_LLAMA)
  return()
endif()

set(HENGSHI_LLAMA_PIN "3.22.1")  # node-llama-cpp version; keep in step with scripts/fetch-llama
set(HENGSHI_LLAMA_FOUND OFF)
set(_hengshi_llama_explicit ON)
if(NOT HENGSHI_LLAMA_PREFIX)
  set(_hengshi_llama_explicit OFF)
  if(DEFINED ENV{HENGSHI_CACHE_DIR} AND NOT "$ENV{HENGSHI_CACHE_DIR}" STREQUAL "")
    set(_hengshi_cache "$ENV{HENGSHI_CACHE_DIR}")
  else()
    set(_hengshi_cache "$ENV{HOME}/.cache/hengshi")
  endif()
  set(_hengshi_llama_prefix "${_hengshi_cache}/llama.cpp-${HENGSHI_LLAMA_PIN}/install")
else()
  set(_hengshi_llama_prefix "${HENGSHI_LLAMA_PREFIX}")
endif()

# The stamp is written last by scripts/fetch-llama: without it the build is absent or partial.
if(NOT EXISTS "${_hengshi_llama_prefix}/.hengshi-stamp")
  set(_hengshi_llama_hint
    "Run scripts/fetch-llama (scripts/setup does) and pass the prefix it prints as "
    "-DHENGSHI_LLAMA_PREFIX=..., or configure with -DHENGSHI_WITH_LLAMA=OFF.")
  if(_hengshi_llama_explicit)
    message(FATAL_ERROR "llama.cpp is not built at ${_hengshi_llama_prefix}. ${_hengshi_llama_hint}")
  endif()
  # A default location that is not there yet: build without the edge LLM rather than fail
  # everyone's configure; its tests then skip and say why.
  message(WARNING "llama.cpp not found at ${_hengshi_llama_prefix}: building WITHOUT the edge "
                  "LLM. ${_hengshi_llama_hint}")
  return()
endif()

# Point the package search at this prefix even when an earlier configure cached another one.
set(llama_DIR "${_hengshi_llama_prefix}/lib/cmake/llama")
set(ggml_DIR "${_hengshi_llama_prefix}/lib/cmake/ggml")
find_package(llama CONFIG REQUIRED PATHS "${_hengshi_llama_prefix}" NO_DEFAULT_PATH)

if(NOT HENGSHI_LLAMA_VOCAB_DIR)
  set(HENGSHI_LLAMA_VOCAB_DIR "${_hengshi_llama_prefix}/../src/models")
endif()
get_filename_component(HENGSHI_LLAMA_VOCAB_DIR "${HENGSHI_LLAMA_VOCAB_DIR}" ABSOLUTE)
set(HENGSHI_LLAMA_BENCH "${_hengshi_llama_prefix}/bin/llama-bench")

add_library(hengshi_llama INTERFACE)
target_link_libraries(hengshi_llama INTERFACE llama ggml::ggml ggml::ggml-base Threads::Threads)
add_library(hengshi::llama ALIAS hengshi_llama)
set(HENGSHI_LLAMA_FOUND ON)
message(STATUS "hengshi: llama.cpp ${LLAMA_VERSION} from ${_hengshi_llama_prefix}")
