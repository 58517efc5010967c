// What the edge LLM fine-tune tests share: a slice of the shipped demo FAQ and the fine-tunable
// test model (its vocabulary cut to the FAQ's tokens, F32, an untied output matrix).
#pragma once

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/child_process.h"

namespace hengshi::testing {

// Writes the rows of the first `intents` intents of data/demo_faq.jsonl, at most `per_intent`
// each, to `path`; returns them.
inline std::vector<nlohmann::json> write_demo_faq_slice(const std::string& path, std::size_t intents,
                                                        int per_intent) {
  std::ifstream in(source_path("data/demo_faq.jsonl"));
  std::ofstream out(path);
  std::vector<nlohmann::json> written;
  std::map<std::string, int> taken;
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json row = nlohmann::json::parse(line);
    const std::string intent = row.value("intent", "");
    if (taken.size() == intents && !taken.contains(intent)) continue;
    if (taken[intent]++ < per_intent) {
      out << line << "\n";
      written.push_back(row);
    }
  }
  return written;
}

// The rows of `in` with their answers rotated among the rows that have one: the data of a bad
// export, for a candidate the gate must refuse.
inline void write_shuffled_answers(const std::string& in_path, const std::string& out_path) {
  std::ifstream in(in_path);
  std::vector<nlohmann::json> rows;
  std::vector<std::string> answers;
  for (std::string line; std::getline(in, line);) {
    rows.push_back(nlohmann::json::parse(line));
    if (rows.back().contains("answer")) answers.push_back(rows.back()["answer"]);
  }
  std::ofstream out(out_path);
  std::size_t next = 1;
  for (auto& row : rows) {
    if (row.contains("answer")) row["answer"] = answers[next++ % answers.size()];
    out << row.dump() << "\n";
  }
}

// `hengshi make-test-model` for a model `hengshi finetune` can train in seconds.
inline ChildProcess::Finished make_finetunable_test_model(const std::string& path,
                                                          const std::string& seed = "42") {
  return ChildProcess::run({binary_path("src/cli/hengshi"), "make-test-model", "--out", path,
                            "--embedding", "256", "--feed-forward", "512", "--context", "256",
                            "--vocab-corpus", source_path("data/demo_faq.jsonl"), "--f32",
                            "--untied-output", "--seed", seed});
}

// The arguments (after `hengshi`, without --out) of the adapter the gateway tests serve:
// `finetune --output lora` at rank 128 with one thread (ctest runs two tests at once), no
// held-out split, no before/after scoring and rows packed (finetune_windows.h; the serving tests
// need an adapter that moved, not the best one).
inline std::vector<std::string> lora_adapter_args(const std::string& base, const std::string& data, int epochs) {
  return {"finetune", "--base", base, "--data", data, "--output", "lora", "--rank", "128", "--epochs",
          std::to_string(epochs), "--lr", "2e-3", "--heldout", "0", "--eval-rows", "0", "--threads", "1",
          "--pack-rows"};
}
// That adapter, trained into `out`.
inline ChildProcess::Finished train_lora_adapter(const std::string& base, const std::string& data,
                                                 const std::string& out, int epochs) {
  std::vector<std::string> argv = lora_adapter_args(base, data, epochs);
  argv.insert(argv.begin(), binary_path("src/cli/hengshi"));
  argv.insert(argv.end(), {"--out", out});
  return ChildProcess::run(argv, std::chrono::seconds(240));
}

}  // namespace hengshi::testing
