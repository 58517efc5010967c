#include "edge/llm_test_model.h"

#include <ggml.h>
#include <gguf.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

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

Status validate(const TestModelOptions& o) {
  auto bad = [](const std::string& why) { return Error{"test_model_options", why}; };
  if (o.layers < 1 || o.embedding < 1 || o.heads < 1 || o.kv_heads < 1 || o.feed_forward < 1 ||
      o.context_length < 1) {
    return bad("test model sizes must be positive");
  }
  if (o.embedding % o.heads != 0) return bad("embedding must be a multiple of heads");
  if (o.heads % o.kv_heads != 0) return bad("heads must be a multiple of kv_heads");
  if ((o.embedding / o.heads) % 2 != 0) return bad("head size must be even (RoPE)");
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
  const auto vocab_size = static_cast<std::int64_t>(gguf_get_arr_n(vocab.get(), tokens_key));

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
