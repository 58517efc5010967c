#include "edge/llm_lifecycle.h"

#include <chrono>
#include <filesystem>
#include <spdlog/spdlog.h>

#include "core/run_on.h"
#include "edge/llm_gate.h"
#include "edge/model_manifest.h"
#include "obs/metrics.h"

namespace hengshi::edge {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// An adapter directory as `hengshi finetune --output lora` wrote it: its files match the
// manifest, and it was trained on the base model that serves (by hash), so a stale or foreign
// adapter is refused instead of silently producing another model's answers.
Result<LlmAdapterConfig> checked_adapter(const std::string& task, const ServingAdapter& adapter,
                                         const ManifestFile& base, const std::string& base_path) {
  const std::string field = "edge.llm.adapters." + task;
  auto manifest = load_verified_manifest(adapter.dir, kEdgeLlmManifest);
  if (!manifest) return Error{manifest.error().code, field + ": " + manifest.error().message};
  if (manifest->training.value("kind", "") != "lora") {
    return Error{"model_invalid", field + ": " + adapter.dir + " holds a full model, not a LoRA adapter"};
  }
  if (auto trained = check_trained_base(*manifest, adapter.dir, base, base_path); !trained) {
    return Error{trained.error().code, field + ": " + trained.error().message};
  }
  return LlmAdapterConfig{task, (fs::path(adapter.dir) / manifest->model_file).string(),
                          static_cast<float>(adapter.scale), manifest->model_version};
}

void count_change(const std::string& action, const std::string& result) {
  obs::Registry::global()
      .counter("hengshi_edge_llm_changes_total", "Edge LLM promotions and rollbacks by result",
               {{"action", action}, {"result", result}})
      .inc();
}

}  // namespace

Result<std::shared_ptr<const LlmServing>> load_serving(const EdgeLlmConfig& knobs, ServingState state) {
  if (!state.model_dir.empty()) {
    auto manifest = load_verified_manifest(state.model_dir, kEdgeLlmManifest);
    if (!manifest) return Error{manifest.error().code, "edge.llm: " + manifest.error().message};
    if (manifest->training.value("kind", "") != "full") {
      return Error{"model_invalid", "edge.llm: " + state.model_dir + " holds a LoRA adapter, not a full model"};
    }
    if (!state.model_version.empty() && manifest->model_version != state.model_version) {
      return Error{"model_invalid", "edge.llm: " + state.model_dir + " now holds " + manifest->model_version +
                                        ", not the promoted " + state.model_version + " (promote it to serve it)"};
    }
    state.model_path = (fs::path(state.model_dir) / manifest->model_file).string();
    state.model_version = manifest->model_version;
  }
  // The base is hashed once per load, and only when adapters must be checked against it (it may
  // be gigabytes).
  Result<ManifestFile> base = ManifestFile{};
  if (!state.adapters.empty()) base = describe_path(state.model_path);
  if (!base) return Error{base.error().code, "edge.llm.model_path: " + base.error().message};
  LlmConfig config;
  config.model_path = state.model_path;
  config.model_version = state.model_version;
  config.threads = knobs.threads;
  config.context_tokens = knobs.context_tokens;
  config.max_tokens = knobs.max_tokens;
  config.workers = knobs.workers;
  config.max_queue = knobs.max_queue;
  config.summary_turns = knobs.summary_turns;
  config.summary_chars = knobs.summary_chars;
  config.merge_adapters = knobs.merge_adapters;
  for (auto& [task, adapter] : state.adapters) {
    auto checked = checked_adapter(task, adapter, *base, state.model_path);
    if (!checked) return checked.error();
    // A state from the history names the versions that passed the gate: a directory rewritten
    // in place since then must not serve ungated.
    if (!adapter.version.empty() && checked->version != adapter.version) {
      return Error{"model_invalid", "edge.llm.adapters." + task + ": " + adapter.dir + " now holds " +
                                        checked->version + ", not the promoted " + adapter.version +
                                        " (promote it to serve it)"};
    }
    adapter.version = checked->version;
    config.adapters.push_back(std::move(*checked));
  }
  auto engine = LlmEngine::load(config);
  if (!engine) return Error{engine.error().code, "edge.llm.model_path: " + engine.error().message};
  auto serving = std::make_shared<LlmServing>();
  serving->description = (*engine)->model_description();
  serving->engine = std::shared_ptr<LlmEngine>(std::move(*engine));
  serving->state = std::move(state);
  serving->loaded_at = utc_timestamp(false);
  return std::shared_ptr<const LlmServing>(std::move(serving));
}

Result<std::unique_ptr<LlmLifecycle>> LlmLifecycle::start(const EdgeLlmConfig& config,
                                                          std::shared_ptr<const IntentEngine> intent) {
  std::optional<EdgeHistory> history;
  if (!config.history.empty()) {
    auto opened = EdgeHistory::open(config.history);
    if (!opened) return Error{opened.error().code, "edge.llm.history: " + opened.error().message};
    history = std::move(*opened);
  }
  const ServingState configured = ServingState::from_config(config);
  Result<std::shared_ptr<const LlmServing>> serving = Error{};
  std::string source = "config";
  if (history && history->serving()) {
    const ServingState promoted = *history->serving();
    serving = load_serving(config, promoted);
    if (serving) {
      source = "history";
      spdlog::info("edge LLM: serving {} as last promoted (edge.llm.history {}), not the config's {}",
                   promoted.describe(), config.history, configured.describe());
    } else {
      source = "config (the history's " + promoted.describe() + " failed to load: " + serving.error().message + ")";
      spdlog::error("edge LLM: {} from edge.llm.history {} failed to load, serving the config's {}: {}",
                    promoted.describe(), config.history, configured.describe(), serving.error().message);
    }
  }
  if (!serving) serving = load_serving(config, configured);
  if (!serving) return serving.error();
  auto slot = std::make_shared<LlmSlot>(std::move(*serving), config.keep_previous);
  std::unique_ptr<LlmLifecycle> lifecycle(
      new LlmLifecycle(config, std::move(history), std::move(slot), std::move(source), std::move(intent)));
  lifecycle->start_watch();
  return lifecycle;
}

LlmLifecycle::LlmLifecycle(EdgeLlmConfig config, std::optional<EdgeHistory> history,
                           std::shared_ptr<LlmSlot> slot, std::string source,
                           std::shared_ptr<const IntentEngine> intent)
    : config_(std::move(config)),
      slot_(std::move(slot)),
      intent_(std::move(intent)),
      source_(std::move(source)),
      history_(std::move(history)),
      thread_(std::make_unique<asio::thread_pool>(1)) {}

LlmLifecycle::~LlmLifecycle() {
  stopping_ = true;
  if (watch_timer_) asio::post(*thread_, [this] { watch_timer_->cancel(); });
  thread_->join();
}

void LlmLifecycle::start_watch() {
  if (config_.watch_interval_ms <= 0) {
    watch_off_ = "edge.llm.watch_interval_ms is 0";
  } else if (!history_) {
    watch_off_ = "needs edge.llm.history (a watched change is a promotion)";
  } else if (config_.gate.data.empty()) {
    watch_off_ = "needs edge.llm.gate.data (a watched change passes the gate first)";
  }
  if (!watch_off_.empty()) {
    if (config_.watch_interval_ms > 0) spdlog::info("edge LLM: serving directories not watched: {}", watch_off_);
    return;
  }
  // The first stamps now, before the gateway serves: a directory rewritten from here on is a
  // change (the thread runs nothing yet, so watch_ is still this thread's).
  (void)watch_.poll(slot_->current()->state);
  watch_timer_ = std::make_unique<asio::steady_timer>(thread_->get_executor());
  asio::post(*thread_, [this] { arm_watch(); });
}

void LlmLifecycle::arm_watch() {
  watch_timer_->expires_after(std::chrono::milliseconds(config_.watch_interval_ms));
  watch_timer_->async_wait([this](const boost::system::error_code& error) {
    if (error || stopping_) return;
    watch_tick();
    arm_watch();
  });
}

void LlmLifecycle::watch_tick() {
  for (const DirChange& change : watch_.poll(slot_->current()->state)) {
    if (stopping_) return;
    const std::string what = change.task.empty() ? "the full model" : "the " + change.task + " adapter";
    spdlog::info("edge LLM: {} now holds {} ({}); promoting it through the gate", change.dir,
                 change.version.empty() ? "an unreadable manifest" : change.version, what);
    const EdgeOutcome outcome = promote_now({change.dir, change.task, "", "watch"});
    if (outcome.code == "change_in_progress") continue;  // another change ran: tried at the next tick
    watch_.tried(change);
  }
}

awaitable<EdgeOutcome> LlmLifecycle::promote(PromoteRequest request) {
  return run_on<EdgeOutcome>(*thread_, [this, request = std::move(request)] { return promote_now(request); });
}

awaitable<EdgeOutcome> LlmLifecycle::rollback(std::string by) {
  return run_on<EdgeOutcome>(*thread_, [this, by = std::move(by)] { return rollback_now(by); });
}

EdgeOutcome LlmLifecycle::finish(HistoryEntry& entry, std::string code, std::string message) {
  if (!code.empty()) {
    if (entry.result.empty()) entry.result = "refused";  // a rollback that failed said so itself
    entry.error = message;
  }
  EdgeOutcome outcome{std::move(code), std::move(message), {}};
  {
    std::lock_guard lock(mutex_);
    if (history_) {
      if (auto appended = history_->append(entry); !appended) {
        // The change (if any) stands — it serves — but the operator must know it is unrecorded.
        spdlog::error("edge LLM history: {}", appended.error().message);
        if (outcome.code.empty()) outcome.message = "not recorded: " + appended.error().message;
      }
    }
    changing_ = false;
  }
  outcome.report = entry.to_json();
  count_change(entry.action, entry.result);
  if (entry.took()) {
    obs::Registry::global()
        .gauge("hengshi_edge_llm_last_change_ms", "Edge LLM: the last change's side load and swap time",
               {{"action", entry.action}, {"phase", "load"}})
        .set(entry.load_ms);
    obs::Registry::global()
        .gauge("hengshi_edge_llm_last_change_ms", "Edge LLM: the last change's side load and swap time",
               {{"action", entry.action}, {"phase", "swap"}})
        .set(entry.swap_ms);
    spdlog::info("edge LLM {} by {}: {} -> {} (load {:.0f} ms, swap {:.3f} ms)", entry.action, entry.by,
                 entry.from.describe(), entry.to.describe(), entry.load_ms, entry.swap_ms);
  } else {
    spdlog::warn("edge LLM {} by {} {}: {} ({}); serving stays {}", entry.action, entry.by, entry.result,
                 entry.candidate, outcome.message, entry.from.describe());
  }
  return outcome;
}

Result<nlohmann::json> LlmLifecycle::run_gate(const PromoteRequest& request, const LlmServing& baseline,
                                              const LlmServing& candidate, bool& passed) const {
  const std::string data = request.data.empty() ? config_.gate.data : request.data;
  auto set = read_gate_set(data, config_.gate.max_rows, config_.gate.refusal);
  if (!set) return set.error();
  if (intent_) {
    use_intent_reference(*set, intent_model_reference(*intent_), "intent model " + intent_->model_version());
  }
  // The task's adapter on each side ("" = its base); the baseline is a fresh copy of what serves
  // when one can load (promote_now), so both sides are timed on engines of their own, in
  // alternation, under the same load.
  auto adapter_of = [&request](const LlmServing& serving) {
    return serving.state.adapters.contains(request.task) ? request.task : std::string();
  };
  GateSide base_side, candidate_side;
  if (auto s = measure_pair({*baseline.engine, adapter_of(baseline)}, {*candidate.engine, adapter_of(candidate)},
                            *set, base_side, candidate_side);
      !s) {
    return s.error();
  }
  base_side.version = baseline.state.describe();
  candidate_side.version = candidate.state.describe();
  base_side.kind = adapter_of(baseline).empty() ? "base" : "lora";
  candidate_side.kind = adapter_of(candidate).empty() ? (candidate.state.model_dir.empty() ? "base" : "full") : "lora";
  const GateTolerance tolerance{config_.gate.f1_tolerance, config_.gate.speed_tolerance,
                                config_.gate.agreement_tolerance, config_.gate.refusal_tolerance};
  const GateVerdict verdict = judge(candidate_side, base_side, tolerance);
  passed = verdict.passed;
  return gate_json(data, *set, tolerance, base_side, candidate_side, verdict);
}

EdgeOutcome LlmLifecycle::promote_now(const PromoteRequest& request) {
  const auto current = slot_->current();
  HistoryEntry entry;
  entry.at = utc_timestamp(false);
  entry.by = request.by.empty() ? "unknown" : request.by.substr(0, 200);
  entry.action = "promote";
  entry.task = request.task;
  entry.candidate = request.dir;
  entry.from = entry.to = current->state;
  {
    std::lock_guard lock(mutex_);
    if (!history_) {
      return {"history_not_configured", "set edge.llm.history: every promotion is recorded there", {}};
    }
    if (changing_) return {"change_in_progress", "another promotion or rollback is running", {}};
    changing_ = true;
  }
  if (request.dir.empty()) return finish(entry, "request_invalid", "dir is missing");
  if (request.data.empty() && config_.gate.data.empty()) {
    return finish(entry, "request_invalid", "no regression set: give data, or set edge.llm.gate.data");
  }
  auto manifest = load_verified_manifest(request.dir, kEdgeLlmManifest);
  if (!manifest) return finish(entry, manifest.error().code, manifest.error().message);
  const std::string kind = manifest->training.value("kind", "");
  ServingState next = current->state;
  if (kind == "lora") {
    if (request.task.empty()) return finish(entry, "request_invalid", request.dir + " is a LoRA adapter: name its task type");
    const auto existing = next.adapters.find(request.task);
    next.adapters[request.task] = {request.dir, existing == next.adapters.end() ? 1.0 : existing->second.scale, {}};
  } else if (kind == "full") {
    if (!request.task.empty()) {
      return finish(entry, "request_invalid", request.dir + " is a full model: it replaces the base for every task type (no task)");
    }
    next.model_dir = request.dir;
    next.model_version.clear();
  } else {
    return finish(entry, "model_invalid", request.dir + ": manifest training.kind is neither full nor lora");
  }

  // Load the candidate (and a copy of what serves, for the gate) on the side.
  const auto load_started = Clock::now();
  auto candidate = load_serving(config_, next);
  if (!candidate) return finish(entry, candidate.error().code, candidate.error().message);
  entry.load_ms = ms_since(load_started);
  auto fresh = load_serving(config_, current->state);
  // When the serving version's files have changed since it loaded (its directory rewritten in
  // place: what the watch promotes), no fresh copy can load: the gate compares with the engine
  // that serves. It answers traffic meanwhile, so its tokens/s may read low; the report says so.
  std::shared_ptr<const LlmServing> baseline = fresh ? std::move(*fresh) : current;
  bool passed = false;
  auto gate = run_gate(request, *baseline, **candidate, passed);
  baseline.reset();
  if (!gate) return finish(entry, gate.error().code, gate.error().message);
  entry.gate = std::move(*gate);
  if (!fresh) entry.gate["baseline_engine"] = "serving (no fresh copy: " + fresh.error().message + ")";
  if (!passed) {
    std::string reasons;
    for (const auto& reason : entry.gate["reasons"]) reasons += (reasons.empty() ? "" : "; ") + reason.get<std::string>();
    return finish(entry, "gate_failed", "the candidate is worse than the serving version: " + reasons);
  }
  const auto swap_started = Clock::now();
  entry.to = (*candidate)->state;
  slot_->swap_in(std::move(*candidate));
  entry.swap_ms = ms_since(swap_started);
  entry.result = "promoted";
  return finish(entry, "", "");
}

EdgeOutcome LlmLifecycle::rollback_now(const std::string& by) {
  const auto current = slot_->current();
  HistoryEntry entry;
  entry.at = utc_timestamp(false);
  entry.by = by.empty() ? "unknown" : by.substr(0, 200);
  entry.action = "rollback";
  entry.from = entry.to = current->state;
  std::optional<ServingState> target;
  {
    std::lock_guard lock(mutex_);
    if (!history_) return {"history_not_configured", "set edge.llm.history: rollback walks back its promotions", {}};
    if (changing_) return {"change_in_progress", "another promotion or rollback is running", {}};
    target = history_->rollback_target();
    if (!target) return {"no_previous_version", "nothing was promoted before " + current->state.describe(), {}};
    changing_ = true;
  }
  const auto previous = slot_->previous();
  if (previous && previous->state == *target) {
    const auto swap_started = Clock::now();  // the version just replaced is still loaded
    slot_->swap_back();
    entry.swap_ms = ms_since(swap_started);
  } else {
    const auto load_started = Clock::now();
    auto loaded = load_serving(config_, *target);
    if (!loaded) {
      entry.result = "failed";
      return finish(entry, loaded.error().code, "cannot load " + target->describe() + ": " + loaded.error().message);
    }
    entry.load_ms = ms_since(load_started);
    const auto swap_started = Clock::now();
    slot_->swap_in(std::move(*loaded));
    entry.swap_ms = ms_since(swap_started);
  }
  entry.to = slot_->current()->state;
  entry.result = "rolled_back";
  // Rolled back in memory, but a directory rewritten since (what the watch promotes) no longer
  // holds the version that now serves: a restart could not load it and would serve the config's
  // state. The operator must hear that now, not at the restart.
  std::string stale;
  for (const ServingDir& d : entry.to.directories()) {
    if (d.version.empty()) continue;
    const std::string now = directory_version(d.dir);
    if (now == d.version) continue;
    stale += (stale.empty() ? "" : "; ") + d.dir + " now holds " + (now.empty() ? "no readable manifest" : now) +
             ", not " + d.version;
  }
  if (!stale.empty()) {
    stale = "serving from memory, but a restart cannot load it (" + stale +
            "): put that version back in its directory, or promote one that stays";
    spdlog::warn("edge LLM rollback: {}", stale);
  }
  return finish(entry, "", stale);
}

nlohmann::json LlmLifecycle::status(bool brief) const {
  const auto current = slot_->current();
  nlohmann::json adapters = nlohmann::json::object();
  for (const auto& [task, adapter] : current->state.adapters) adapters[task] = adapter.version;
  nlohmann::json status = {{"serving", current->state.describe()},
                           {"base", fs::path(current->state.model_path).filename().string()},
                           {"base_version", current->state.model_version},
                           {"adapters", std::move(adapters)}};
  std::lock_guard lock(mutex_);
  auto brief_entry = [](const HistoryEntry* entry) -> nlohmann::json {
    if (entry == nullptr) return nullptr;
    nlohmann::json json = {{"at", entry->at}, {"by", entry->by}, {"to", entry->to.describe()}};
    if (!entry->gate.is_null()) json["gate_passed"] = entry->gate.value("passed", false);
    return json;
  };
  if (brief) {
    status["last_promotion"] = history_ ? brief_entry(history_->last("promote")) : nullptr;
    status["last_rollback"] = history_ ? brief_entry(history_->last("rollback")) : nullptr;
    return status;
  }
  status["state"] = current->state.to_json();
  status["model"] = current->description;
  status["loaded_at"] = current->loaded_at;
  status["source"] = source_;
  const auto previous = slot_->previous();
  status["previous_loaded"] = previous ? nlohmann::json(previous->state.describe()) : nlohmann::json(nullptr);
  status["history"] = history_ ? nlohmann::json(history_->path()) : nlohmann::json(nullptr);
  status["change_in_progress"] = changing_;
  status["watch"] = watch_off_.empty() ? nlohmann::json{{"interval_ms", config_.watch_interval_ms}}
                                       : nlohmann::json{{"off", watch_off_}};
  if (history_) {
    const auto target = history_->rollback_target();
    status["rollback_to"] = target ? nlohmann::json(target->describe()) : nlohmann::json(nullptr);
    const HistoryEntry* promotion = history_->last("promote");
    const HistoryEntry* rollback = history_->last("rollback");
    status["last_promotion"] = promotion ? promotion->to_json() : nlohmann::json(nullptr);
    status["last_rollback"] = rollback ? rollback->to_json() : nlohmann::json(nullptr);
    status["last_attempt"] = history_->entries().empty() ? nlohmann::json(nullptr) : history_->entries().back().to_json();
  }
  return status;
}

}  // namespace hengshi::edge
