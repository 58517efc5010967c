// ServingDirWatch: which of the edge LLM's serving directories (each adapter's, a promoted full
// model's) now holds a version other than the one that serves — written in place by
// `hengshi finetune --out DIR`, or replaced by a deploy. The lifecycle promotes each change it
// reports through the gate; a change that was tried (promoted or refused) is not reported again
// until the directory changes once more.
//
// A directory's stamp is its files' sizes and modification times (in name order); a change is reported
// only once two polls in a row saw the same stamp (core/stable_file_change.h), so a directory
// still being written is never read half-way. Pure file-system reads: no llama.cpp.
//
// Not thread-safe: the lifecycle polls it from its own thread.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/stable_file_change.h"
#include "edge/serving_state.h"

namespace hengshi::edge {

// The model_version in `dir`'s manifest, or "" when the manifest is missing or not JSON.
std::string directory_version(const std::string& dir);

struct DirChange {
  std::string task;     // the adapter's task type; "" = the promoted full model
  std::string dir;
  std::string version;  // the manifest's model_version now; "" when it cannot be read
  FileStamp stamp;      // what was seen, for tried()
};

class ServingDirWatch {
 public:
  // The changed directories of `serving`. A directory seen for the first time is remembered as
  // it is (what serves was loaded from it); one no longer serving is forgotten.
  std::vector<DirChange> poll(const ServingState& serving);
  // `change` was acted on: report it no more (until the directory changes again). A change not
  // marked tried is reported again at the next poll.
  void tried(const DirChange& change);

  // The sizes and times of `dir`'s regular files, in name order.
  static FileStamp stamp_directory(const std::string& dir);

 private:
  std::map<std::string, StableFileChange> watches_;  // by task + '\x1f' + dir
};

}  // namespace hengshi::edge
