// Models that many test processes need, trained once per build by the real CLI and shared.
// gtest_discover_tests runs every test in its own process, so a suite that trained its model in
// SetUpTestSuite trained it once per test: ~2.4 s each, many times that under ASan. The first
// process to ask trains into <build>/test-fixtures/ under a file lock; the others wait for it and
// reuse the result. The folder's name carries a hash of the data and of the hengshi binary, so a
// changed trainer or data set trains anew. Callers must treat the folder as read-only.
#pragma once

#include <string>
#include <vector>

namespace hengshi::testing {

struct SharedModel {
  std::string dir;     // the model directory ("" when training failed)
  std::string output;  // what the training command printed (stdout + stderr, labelled)
  bool ok = false;
};

// How an argument that names a file counts in the fingerprint.
enum class FileArguments {
  path_and_content,  // the same file at the same path (inputs under the source tree)
  content_only,      // the same bytes anywhere: inputs each test process writes to its own folder
};

// `hengshi <args...> --out DIR`, once per build and fingerprint.
SharedModel shared_trained_model(const std::string& name, const std::vector<std::string>& args,
                                 FileArguments files = FileArguments::path_and_content);

// The shipped demo FAQ (data/demo_faq.jsonl), trained without a search: what most gateway tests use.
SharedModel shared_demo_intent_model();

// The small fixture (tests/edge/fixtures/intent_small.jsonl: 4 intents + __oos__, 10 rows each),
// trained without a search: the intent engine's and calibration's unit tests.
SharedModel shared_small_intent_model();

}  // namespace hengshi::testing
