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

// `hengshi <args...> --out DIR` on `data` (a path under the source tree), once per build.
SharedModel shared_trained_model(const std::string& name, const std::vector<std::string>& args);

// The shipped demo FAQ (data/demo_faq.jsonl), trained without a search: what most gateway tests use.
SharedModel shared_demo_intent_model();

}  // namespace hengshi::testing
