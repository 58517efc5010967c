#include "edge/llm_lora_merge.h"

#include <Eigen/Dense>

#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include "edge/llm_gguf_file.h"

namespace hengshi::edge {
namespace {

constexpr const char* kFailed = "lora_merge_failed";
Error failed(const std::string& why) { return Error{kFailed, why}; }

// A 2-D tensor's values as F32, row-major (ne1 rows of ne0).
Result<std::vector<float>> to_f32(const ggml_tensor* t) {
  const auto count = static_cast<std::size_t>(ggml_nelements(t));
  std::vector<float> out(count);
  if (t->type == GGML_TYPE_F32) {
    std::memcpy(out.data(), t->data, count * sizeof(float));
    return out;
  }
  const auto* traits = ggml_get_type_traits(t->type);
  if (traits->to_float == nullptr) {
    return failed(std::string("tensor ") + t->name + " has type " + ggml_type_name(t->type) +
                  ", which cannot be read as F32");
  }
  traits->to_float(t->data, out.data(), static_cast<std::int64_t>(count));
  return out;
}

// Writes F32 values back into `t` in its own type.
Status from_f32(const std::vector<float>& values, ggml_tensor* t) {
  const auto count = static_cast<std::int64_t>(values.size());
  switch (t->type) {
    case GGML_TYPE_F32:
      std::memcpy(t->data, values.data(), values.size() * sizeof(float));
      return Ok{};
    case GGML_TYPE_F16:
      ggml_fp32_to_fp16_row(values.data(), static_cast<ggml_fp16_t*>(t->data), count);
      return Ok{};
    case GGML_TYPE_BF16:
      ggml_fp32_to_bf16_row(values.data(), static_cast<ggml_bf16_t*>(t->data), count);
      return Ok{};
    default:
      break;
  }
  if (ggml_quantize_requires_imatrix(t->type)) {
    return failed(std::string("tensor ") + t->name + " is " + ggml_type_name(t->type) +
                  ", which needs an importance matrix to quantise: serve this adapter at runtime");
  }
  const std::size_t written = ggml_quantize_chunk(t->type, values.data(), t->data, 0, t->ne[1], t->ne[0], nullptr);
  if (written != ggml_nbytes(t)) {
    return failed(std::string("tensor ") + t->name + ": quantising to " + ggml_type_name(t->type) + " wrote " +
                  std::to_string(written) + " of " + std::to_string(ggml_nbytes(t)) + " bytes");
  }
  return Ok{};
}

}  // namespace

Result<LoraMergeReport> merge_lora_adapter(const std::string& base_path, const std::string& adapter_path,
                                           float scale, const std::string& out_path) {
  const auto started = std::chrono::steady_clock::now();
  LoadedGguf base;
  LoadedGguf adapter;
  if (auto s = base.read(base_path, kFailed); !s) return s.error();
  if (auto s = adapter.read(adapter_path, kFailed); !s) return s.error();
  float alpha = 0.0f;
  if (const std::int64_t key = gguf_find_key(adapter.gguf, "adapter.lora.alpha");
      key >= 0 && gguf_get_kv_type(adapter.gguf, key) == GGUF_TYPE_FLOAT32) {
    alpha = gguf_get_val_f32(adapter.gguf, key);
  }

  using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  LoraMergeReport report;
  for (ggml_tensor* a = ggml_get_first_tensor(adapter.tensors); a != nullptr;
       a = ggml_get_next_tensor(adapter.tensors, a)) {
    const std::string name = a->name;
    constexpr std::string_view kSuffix = ".lora_a";
    if (name.size() <= kSuffix.size() || name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0) {
      continue;
    }
    const std::string target = name.substr(0, name.size() - kSuffix.size());
    ggml_tensor* b = ggml_get_tensor(adapter.tensors, (target + ".lora_b").c_str());
    ggml_tensor* w = ggml_get_tensor(base.tensors, target.c_str());
    if (b == nullptr) return failed(adapter_path + ": " + name + " has no " + target + ".lora_b");
    if (w == nullptr) return failed(adapter_path + " adapts " + target + ", which " + base_path + " does not have");
    // lora_a is ne = [cols, r], lora_b is ne = [r, rows], the base matrix ne = [cols, rows].
    const std::int64_t rank = a->ne[1];
    if (ggml_n_dims(w) != 2 || a->ne[0] != w->ne[0] || b->ne[0] != rank || b->ne[1] != w->ne[1]) {
      return failed(adapter_path + ": the factors of " + target + " do not match its shape in " + base_path);
    }
    auto a_values = to_f32(a);
    if (!a_values) return a_values.error();
    auto b_values = to_f32(b);
    if (!b_values) return b_values.error();
    auto w_values = to_f32(w);
    if (!w_values) return w_values.error();
    // llama.cpp scales B·A by scale · alpha / r, or by scale alone when the adapter has no alpha.
    const float factor = alpha != 0.0f ? scale * alpha / static_cast<float>(rank) : scale;
    Eigen::Map<const RowMajor> lora_a(a_values->data(), rank, a->ne[0]);
    Eigen::Map<const RowMajor> lora_b(b_values->data(), w->ne[1], rank);
    Eigen::Map<RowMajor> weights(w_values->data(), w->ne[1], w->ne[0]);
    weights.noalias() += factor * (lora_b * lora_a);
    if (auto s = from_f32(*w_values, w); !s) return s.error();
    ++report.tensors;
  }
  if (report.tensors == 0) return failed(adapter_path + " holds no lora_a/lora_b pair");

  std::unique_ptr<gguf_context, decltype(&gguf_free)> out(gguf_init_empty(), &gguf_free);
  gguf_set_kv(out.get(), base.gguf);
  // By the file's own list: the ggml context also holds the blob the tensors point into.
  for (std::int64_t i = 0; i < gguf_get_n_tensors(base.gguf); ++i) {
    gguf_add_tensor(out.get(), ggml_get_tensor(base.tensors, gguf_get_tensor_name(base.gguf, i)));
  }
  if (!gguf_write_to_file(out.get(), out_path.c_str(), /*only_meta=*/false)) {
    return failed("cannot write " + out_path);
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return report;
}

}  // namespace hengshi::edge
