#include "edge/llm_test_model.h"

#include <ggml.h>
#include <gguf.h>
#include <llama.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"
#include "edge/llm_runtime.h"

namespace hengshi::edge {
namespace {

struct GgufDeleter {
  void operator()(gguf_context* ctx) const { gguf_free(ctx); }
};
struct GgmlDeleter {
  void operator()(ggml_context* ctx) const { ggml_free(ctx); }
};
using GgufPtr = std::unique_ptr<gguf_context, GgufDeleter>;
using GgmlPtr = std::unique_ptr<ggml_context, GgmlDeleter>;

constexpr std::string_view kChatMlTemplate =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}";

// splitmix64: tiny, fully specified, so weights are identical on every platform (unlike the
// distributions of <random>, whose algorithms the standard leaves to the library).
class WeightSource {
 public:
  explicit WeightSource(std::uint64_t seed) : state_(seed) {}
  // Uniform in [-1, 1).
  float next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    return static_cast<float>(static_cast<double>(z >> 40) / double(1ULL << 23) - 1.0);
  }

 private:
  std::uint64_t state_;
};

struct TensorSpec {
  std::string name;
  std::int64_t columns;   // ne0
  std::int64_t rows;      // ne1; 1 for a vector
  float scale;            // standard deviation of the weights; 0 with `constant`
  float constant = 0.0f;  // used when scale == 0 (norm weights are 1)
};

std::vector<TensorSpec> tensor_specs(const TestModelOptions& o, std::int64_t vocab_size) {
  const std::int64_t head_size = o.embedding / o.heads;
  const std::int64_t kv_width = head_size * o.kv_heads;
  const bool biases = o.architecture == "qwen2";
  auto fan_in = [](std::int64_t n) { return static_cast<float>(1.0 / std::sqrt(double(n))); };
  // The output matrix is tied to the embedding; its scale makes logits spread over a few nats
  // (a peaked distribution, like a trained model's) rather than a flat one.
  const float embedding_scale = 3.0f * fan_in(o.embedding);

  std::vector<TensorSpec> specs;
  specs.push_back({"token_embd.weight", o.embedding, vocab_size, embedding_scale});
  specs.push_back({"output_norm.weight", o.embedding, 1, 0.0f, 1.0f});
  if (o.untied_output) specs.push_back({"output.weight", o.embedding, vocab_size, embedding_scale});
  for (int layer = 0; layer < o.layers; ++layer) {
    const std::string p = "blk." + std::to_string(layer) + ".";
    specs.push_back({p + "attn_norm.weight", o.embedding, 1, 0.0f, 1.0f});
    specs.push_back({p + "attn_q.weight", o.embedding, o.embedding, fan_in(o.embedding)});
    specs.push_back({p + "attn_k.weight", o.embedding, kv_width, fan_in(o.embedding)});
    specs.push_back({p + "attn_v.weight", o.embedding, kv_width, fan_in(o.embedding)});
    if (biases) {
      specs.push_back({p + "attn_q.bias", o.embedding, 1, 0.02f});
      specs.push_back({p + "attn_k.bias", kv_width, 1, 0.02f});
      specs.push_back({p + "attn_v.bias", kv_width, 1, 0.02f});
    }
    specs.push_back({p + "attn_output.weight", o.embedding, o.embedding, fan_in(o.embedding)});
    specs.push_back({p + "ffn_norm.weight", o.embedding, 1, 0.0f, 1.0f});
    specs.push_back({p + "ffn_gate.weight", o.embedding, o.feed_forward, fan_in(o.embedding)});
    specs.push_back({p + "ffn_up.weight", o.embedding, o.feed_forward, fan_in(o.embedding)});
    specs.push_back({p + "ffn_down.weight", o.feed_forward, o.embedding, fan_in(o.feed_forward)});
  }
  return specs;
}

// Ids of the tokens llama.cpp's tokenizer (loaded from the vocabulary GGUF alone) gives `texts`.
Result<std::vector<std::int64_t>> corpus_tokens(const std::string& vocab_path,
                                                const std::vector<std::string>& texts) {
  init_llama_once();
  llama_model_params params = llama_model_default_params();
  params.vocab_only = true;
  std::unique_ptr<llama_model, decltype(&llama_model_free)> model(
      llama_model_load_from_file(vocab_path.c_str(), params), &llama_model_free);
  if (!model) return Error{"vocab_unreadable", "llama.cpp cannot load the vocabulary " + vocab_path};
  const llama_vocab* vocab = llama_model_get_vocab(model.get());
  std::vector<std::int64_t> ids;
  std::vector<llama_token> tokens;
  for (const auto& text : texts) {
    tokens.resize(text.size() + 8);
    const int n = llama_tokenize(vocab, text.data(), static_cast<std::int32_t>(text.size()),
                                 tokens.data(), static_cast<std::int32_t>(tokens.size()),
                                 /*add_special=*/false, /*parse_special=*/false);
    if (n < 0) return Error{"test_model_options", "cannot tokenize a corpus text"};
    ids.insert(ids.end(), tokens.begin(), tokens.begin() + n);
  }
  return ids;
}

// Cuts the BPE vocabulary in `out` (tokenizer.* keys copied from the vocabulary GGUF) to the
// tokens `keep` marks plus the non-normal ones (control, user-defined: <|im_start|> and the
// like), renumbered in order; keeps the merges whose parts and result survive and remaps every
// tokenizer.ggml.*_token_id. Returns the new vocabulary size.
Result<std::int64_t> cut_vocabulary(gguf_context* out, std::int64_t limit,
                                    const std::vector<std::int64_t>& corpus_ids) {
  auto fail = [](const std::string& why) { return Error{"test_model_options", why}; };
  const std::int64_t model_key = gguf_find_key(out, "tokenizer.ggml.model");
  if (model_key < 0 || std::string_view(gguf_get_val_str(out, model_key)) != "gpt2") {
    return fail("a vocabulary cut needs a BPE (gpt2-style) vocabulary, such as qwen2's");
  }
  const std::int64_t tokens_key = gguf_find_key(out, "tokenizer.ggml.tokens");
  const std::int64_t types_key = gguf_find_key(out, "tokenizer.ggml.token_type");
  const std::int64_t merges_key = gguf_find_key(out, "tokenizer.ggml.merges");
  if (types_key < 0 || merges_key < 0 || gguf_get_arr_type(out, types_key) != GGUF_TYPE_INT32) {
    return fail("a vocabulary cut needs tokenizer.ggml.token_type (int32) and tokenizer.ggml.merges");
  }
  const auto size = static_cast<std::int64_t>(gguf_get_arr_n(out, tokens_key));
  const auto* types = static_cast<const std::int32_t*>(gguf_get_arr_data(out, types_key));
  constexpr std::int32_t kNormal = 1;  // llama_token_type LLAMA_TOKEN_TYPE_NORMAL

  std::unordered_map<std::string, std::int64_t> id_of;
  id_of.reserve(static_cast<std::size_t>(size));
  for (std::int64_t i = 0; i < size; ++i) {
    id_of.emplace(gguf_get_arr_str(out, tokens_key, static_cast<std::size_t>(i)), i);
  }
  std::vector<char> keep(static_cast<std::size_t>(size), 0);
  for (std::int64_t i = 0; i < size; ++i) {
    keep[static_cast<std::size_t>(i)] = i < std::max<std::int64_t>(limit, 256) || types[i] != kNormal;
  }
  for (const std::int64_t id : corpus_ids) {
    if (id >= 0 && id < size) keep[static_cast<std::size_t>(id)] = 1;
  }
  // A merge's parts come from earlier merges, so one pass from the last merge back keeps every
  // token a kept token is built through.
  const std::size_t merge_count = gguf_get_arr_n(out, merges_key);
  auto split_merge = [&](std::size_t i) -> std::pair<std::string, std::string> {
    std::string_view merge = gguf_get_arr_str(out, merges_key, i);
    const auto space = merge.find(' ', 1);
    if (space == std::string_view::npos) return {};
    return {std::string(merge.substr(0, space)), std::string(merge.substr(space + 1))};
  };
  for (std::size_t i = merge_count; i-- > 0;) {
    const auto [left, right] = split_merge(i);
    const auto result = id_of.find(left + right);
    if (left.empty() || result == id_of.end() || !keep[static_cast<std::size_t>(result->second)]) {
      continue;
    }
    for (const auto& part : {left, right}) {
      if (const auto found = id_of.find(part); found != id_of.end()) {
        keep[static_cast<std::size_t>(found->second)] = 1;
      }
    }
  }

  std::vector<std::int64_t> new_id(static_cast<std::size_t>(size), -1);
  std::vector<std::string> tokens;
  std::vector<std::int32_t> kept_types;
  for (std::int64_t i = 0; i < size; ++i) {
    if (!keep[static_cast<std::size_t>(i)]) continue;
    new_id[static_cast<std::size_t>(i)] = static_cast<std::int64_t>(tokens.size());
    tokens.emplace_back(gguf_get_arr_str(out, tokens_key, static_cast<std::size_t>(i)));
    kept_types.push_back(types[i]);
  }
  auto kept = [&](const std::string& token) {
    const auto found = id_of.find(token);
    return found != id_of.end() && keep[static_cast<std::size_t>(found->second)];
  };
  std::vector<std::string> merges;
  for (std::size_t i = 0; i < merge_count; ++i) {
    const auto [left, right] = split_merge(i);
    if (!left.empty() && kept(left) && kept(right) && kept(left + right)) {
      merges.emplace_back(gguf_get_arr_str(out, merges_key, i));
    }
  }

  auto set_strings = [out](const char* key, const std::vector<std::string>& values) {
    std::vector<const char*> pointers;
    pointers.reserve(values.size());
    for (const auto& value : values) pointers.push_back(value.c_str());
    gguf_set_arr_str(out, key, pointers.data(), pointers.size());
  };
  set_strings("tokenizer.ggml.tokens", tokens);
  set_strings("tokenizer.ggml.merges", merges);
  gguf_set_arr_data(out, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, kept_types.data(),
                    kept_types.size());
  gguf_remove_key(out, "tokenizer.ggml.scores");  // BPE does not read them

  for (std::int64_t k = gguf_get_n_kv(out); k-- > 0;) {
    const std::string key = gguf_get_key(out, k);
    if (key.rfind("tokenizer.ggml.", 0) != 0 || !key.ends_with("_token_id") ||
        gguf_get_kv_type(out, k) != GGUF_TYPE_UINT32) {
      continue;
    }
    const std::uint32_t old_id = gguf_get_val_u32(out, k);
    if (old_id >= new_id.size() || new_id[old_id] < 0) {
      gguf_remove_key(out, key.c_str());
    } else {
      gguf_set_val_u32(out, key.c_str(), static_cast<std::uint32_t>(new_id[old_id]));
    }
  }
  return static_cast<std::int64_t>(tokens.size());
}

Status validate(const TestModelOptions& o) {
  auto bad = [](const std::string& why) { return Error{"test_model_options", why}; };
  if (o.layers < 1 || o.embedding < 1 || o.heads < 1 || o.kv_heads < 1 || o.feed_forward < 1 ||
      o.context_length < 1) {
    return bad("test model sizes must be positive");
  }
  if (o.embedding % o.heads != 0) return bad("embedding must be a multiple of heads");
  if (o.heads % o.kv_heads != 0) return bad("heads must be a multiple of kv_heads");
  if ((o.embedding / o.heads) % 2 != 0) return bad("head size must be even (RoPE)");
  if (o.vocab_limit < 0) return bad("vocab_limit must be >= 0");
  return Ok{};
}

}  // namespace

Status make_test_model(const std::string& vocab_path, const std::string& out_path,
                       const TestModelOptions& options) {
  if (auto valid = validate(options); !valid) return valid;

  GgufPtr vocab(gguf_init_from_file(vocab_path.c_str(), {/*no_alloc=*/true, /*ctx=*/nullptr}));
  if (!vocab) {
    return Error{"vocab_unreadable",
                 "cannot read vocabulary GGUF " + vocab_path + " (missing, or not a GGUF file)"};
  }
  const std::int64_t tokens_key = gguf_find_key(vocab.get(), "tokenizer.ggml.tokens");
  if (tokens_key < 0 || gguf_get_kv_type(vocab.get(), tokens_key) != GGUF_TYPE_ARRAY) {
    return Error{"vocab_unreadable", vocab_path + " has no tokenizer.ggml.tokens array"};
  }
  auto vocab_size = static_cast<std::int64_t>(gguf_get_arr_n(vocab.get(), tokens_key));

  // Metadata: the vocabulary's tokenizer.* pairs, then the architecture's hyper-parameters.
  GgufPtr out(gguf_init_empty());
  gguf_set_kv(out.get(), vocab.get());
  for (std::int64_t i = gguf_get_n_kv(out.get()); i-- > 0;) {
    std::string key = gguf_get_key(out.get(), i);
    if (key.rfind("tokenizer.", 0) != 0) gguf_remove_key(out.get(), key.c_str());
  }
  if (!options.chat_template) {
    gguf_remove_key(out.get(), "tokenizer.chat_template");
  } else if (gguf_find_key(out.get(), "tokenizer.chat_template") < 0) {
    gguf_set_val_str(out.get(), "tokenizer.chat_template", std::string(kChatMlTemplate).c_str());
  }

  if (options.vocab_limit > 0 || !options.vocab_corpus.empty()) {
    std::vector<std::int64_t> corpus_ids;
    if (!options.vocab_corpus.empty()) {
      auto ids = corpus_tokens(vocab_path, options.vocab_corpus);
      if (!ids) return ids.error();
      corpus_ids = std::move(*ids);
    }
    auto cut = cut_vocabulary(out.get(), options.vocab_limit, corpus_ids);
    if (!cut) return cut.error();
    vocab_size = *cut;
  }

  const std::string& arch = options.architecture;
  auto key = [&arch](const char* suffix) { return arch + "." + suffix; };
  gguf_set_val_str(out.get(), "general.architecture", arch.c_str());
  gguf_set_val_str(out.get(), "general.name", "hengshi random test model");
  gguf_set_val_u32(out.get(), "general.file_type", options.f16 ? 1 : 0);  // MOSTLY_F16 / ALL_F32
  gguf_set_val_u32(out.get(), key("context_length").c_str(), options.context_length);
  gguf_set_val_u32(out.get(), key("embedding_length").c_str(), options.embedding);
  gguf_set_val_u32(out.get(), key("block_count").c_str(), options.layers);
  gguf_set_val_u32(out.get(), key("feed_forward_length").c_str(), options.feed_forward);
  gguf_set_val_u32(out.get(), key("attention.head_count").c_str(), options.heads);
  gguf_set_val_u32(out.get(), key("attention.head_count_kv").c_str(), options.kv_heads);
  gguf_set_val_u32(out.get(), key("rope.dimension_count").c_str(),
                   options.embedding / options.heads);
  gguf_set_val_f32(out.get(), key("rope.freq_base").c_str(),
                   arch == "qwen2" ? 1000000.0f : 10000.0f);
  gguf_set_val_f32(out.get(), key("attention.layer_norm_rms_epsilon").c_str(), 1e-6f);
  if (options.pooling >= 0) gguf_set_val_u32(out.get(), key("pooling_type").c_str(), static_cast<std::uint32_t>(options.pooling));

  // Tensors: one ggml context holding every weight, filled from the seeded source.
  const auto specs = tensor_specs(options, vocab_size);
  std::size_t bytes = 0;
  for (const auto& spec : specs) {
    const ggml_type type = spec.rows > 1 && options.f16 ? GGML_TYPE_F16 : GGML_TYPE_F32;
    bytes += ggml_row_size(type, spec.columns) * static_cast<std::size_t>(spec.rows) + 64;
  }
  bytes += ggml_tensor_overhead() * specs.size() + 1024;
  GgmlPtr weights(ggml_init({bytes, nullptr, /*no_alloc=*/false}));
  if (!weights) return Error{"test_model_write", "cannot allocate " + std::to_string(bytes) + " B"};

  WeightSource source(options.seed);
  std::vector<float> row;
  for (const auto& spec : specs) {
    const ggml_type type = spec.rows > 1 && options.f16 ? GGML_TYPE_F16 : GGML_TYPE_F32;
    ggml_tensor* tensor = spec.rows > 1
                              ? ggml_new_tensor_2d(weights.get(), type, spec.columns, spec.rows)
                              : ggml_new_tensor_1d(weights.get(), type, spec.columns);
    ggml_set_name(tensor, spec.name.c_str());
    const float amplitude = spec.scale * std::sqrt(3.0f);  // uniform with the wanted deviation
    row.resize(static_cast<std::size_t>(spec.columns));
    for (std::int64_t r = 0; r < spec.rows; ++r) {
      for (auto& value : row) value = spec.scale > 0 ? amplitude * source.next() : spec.constant;
      char* dst = static_cast<char*>(tensor->data) + r * tensor->nb[1];
      if (type == GGML_TYPE_F16) {
        ggml_fp32_to_fp16_row(row.data(), reinterpret_cast<ggml_fp16_t*>(dst), spec.columns);
      } else {
        std::copy(row.begin(), row.end(), reinterpret_cast<float*>(dst));
      }
    }
    gguf_add_tensor(out.get(), tensor);
  }

  std::error_code ec;
  const auto target = std::filesystem::path(out_path);
  if (target.has_parent_path()) std::filesystem::create_directories(target.parent_path(), ec);
  // A unique temporary name: tests in parallel processes may write the same model at once.
  static std::atomic<int> counter{0};
  const std::string temporary =
      out_path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  if (!gguf_write_to_file(out.get(), temporary.c_str(), /*only_meta=*/false)) {
    std::filesystem::remove(temporary, ec);
    return Error{"test_model_write", "cannot write " + out_path};
  }
  std::filesystem::rename(temporary, target, ec);
  if (ec) return Error{"test_model_write", "cannot write " + out_path + ": " + ec.message()};
  return Ok{};
}

Status make_test_adapter(const std::string& base_path, const std::string& out_path,
                         const TestAdapterOptions& options) {
  ggml_context* raw = nullptr;
  GgufPtr base(gguf_init_from_file(base_path.c_str(), {/*no_alloc=*/true, &raw}));
  GgmlPtr base_tensors(raw);
  if (!base) return Error{"test_model_write", "cannot read " + base_path + " as GGUF"};
  struct Target {
    std::string name;
    std::int64_t cols, rows;
  };
  std::vector<Target> targets;
  for (std::int64_t i = 0; i < gguf_get_n_tensors(base.get()); ++i) {
    const ggml_tensor* t = ggml_get_tensor(base_tensors.get(), gguf_get_tensor_name(base.get(), i));
    const std::string name = t->name;
    if (ggml_n_dims(t) != 2 || name.find("token_embd") != std::string::npos) continue;
    if (!options.matching.empty() && name.find(options.matching) == std::string::npos) continue;
    targets.push_back({name, t->ne[0], t->ne[1]});
  }
  if (!options.extra_tensor.empty()) targets.push_back({options.extra_tensor, 64, 64});
  if (targets.empty()) return Error{"test_model_write", base_path + " has no matrix to adapt"};

  std::size_t bytes = 1024;
  for (const auto& t : targets) {
    bytes += 2 * ggml_tensor_overhead() + static_cast<std::size_t>((t.cols + t.rows) * options.rank) * 4 + 64;
  }
  GgmlPtr ctx(ggml_init({bytes, nullptr, /*no_alloc=*/false}));
  GgufPtr out(gguf_init_empty());
  gguf_set_val_str(out.get(), "general.architecture",
                   gguf_get_val_str(base.get(), gguf_find_key(base.get(), "general.architecture")));
  gguf_set_val_str(out.get(), "general.type", "adapter");
  gguf_set_val_str(out.get(), "adapter.type", "lora");
  if (options.alpha != 0.0f) gguf_set_val_f32(out.get(), "adapter.lora.alpha", options.alpha);
  WeightSource source(options.seed);
  for (const auto& t : targets) {
    ggml_tensor* a = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, t.cols, options.rank);
    ggml_tensor* b = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, options.rank, t.rows);
    ggml_set_name(a, (t.name + ".lora_a").c_str());
    ggml_set_name(b, (t.name + ".lora_b").c_str());
    for (ggml_tensor* factor : {a, b}) {
      auto* values = static_cast<float*>(factor->data);
      for (std::int64_t i = 0; i < ggml_nelements(factor); ++i) values[i] = options.magnitude * source.next();
      gguf_add_tensor(out.get(), factor);
    }
  }
  if (!gguf_write_to_file(out.get(), out_path.c_str(), /*only_meta=*/false)) {
    return Error{"test_model_write", "cannot write " + out_path};
  }
  return Ok{};
}

Result<std::vector<std::string>> read_corpus_texts(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error{"invalid_argument", "cannot read the corpus " + path};
  std::vector<std::string> texts;
  std::function<void(const nlohmann::json&)> collect = [&](const nlohmann::json& value) {
    if (value.is_string()) {
      texts.push_back(value.get<std::string>());
    } else if (value.is_structured()) {
      for (const auto& item : value) collect(item);
    }
  };
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto parsed = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded()) {
      texts.push_back(line);
    } else {
      collect(parsed);
    }
  }
  return texts;
}

std::string default_vocab_dir() {
  if (const char* source = std::getenv("HENGSHI_LLAMA_SRC"); source != nullptr && *source != '\0') {
    return (std::filesystem::path(source) / "models").string();
  }
#ifdef HENGSHI_LLAMA_VOCAB_DIR
  return HENGSHI_LLAMA_VOCAB_DIR;
#else
  return {};
#endif
}

std::string llama_bench_path() {
  if (const char* path = std::getenv("HENGSHI_LLAMA_BENCH"); path != nullptr && *path != '\0') {
    return path;
  }
#ifdef HENGSHI_LLAMA_BENCH
  return HENGSHI_LLAMA_BENCH;
#else
  return {};
#endif
}

}  // namespace hengshi::edge
