// Hit guards: a semantic hit needs more than a high cosine. Two questions that differ only by a
// negation or a flipped direction ("how do I enable 2FA" / "how do I disable 2FA", "怎么开通会员" /
// "怎么取消会员"), or by a number, date, amount, order id or e-mail domain ("refund order 1234" /
// "refund order 1243") look alike to every embedder and want different answers. A wrong hit is
// worse than a miss, so the guards refuse such pairs whatever their similarity.
//
//   polarity  the parity of negations differs (不/没/别/无/非/未/取消/勿/莫/否, not/no/never/n't/
//             without/cannot ...), or a direction pair is on opposite sides (开/关, 开通/取消,
//             打开/关闭, 绑定/解绑, 订阅/退订, 升级/降级, 上调/下调, on/off, enable/disable,
//             open/close, start/stop, add/remove, increase/decrease, lock/unlock, ...); common
//             compounds that only look negative (非常, 无论, 未来, 别人, 关于, 开心 ...) are skipped
//   numbers   the sequence of numbers differs (ASCII digits after NFKC, decimals and separators
//             kept; Chinese numerals before a measure word or after 第), or the e-mail domains do
//
// Inputs are normalised text (NFKC, case-folded): the forms TextForms::normalize gives.
// Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hengshi::cache {

// polarity and numbers read the two texts (guard_rejects); intent compares the edge intent model's
// labels of the two questions, when the gateway has one (AnswerCache, CacheQuery::intent).
enum class Guard { polarity, numbers, intent };
const char* to_string(Guard guard);

// What the guards compare, extracted once per text (a cached entry keeps its own).
struct GuardFeatures {
  int negations = 0;
  std::vector<std::pair<int, int>> directions;  // (pair id, side 0|1), sorted, unique
  std::vector<std::string> numbers;             // in order of appearance
  std::vector<std::string> domains;             // e-mail domains, sorted

  bool operator==(const GuardFeatures&) const = default;
};

GuardFeatures guard_features(std::string_view normalized);

// The guard that refuses serving `cached`'s answer to `query`, or nullopt when none does.
std::optional<Guard> guard_rejects(const GuardFeatures& query, const GuardFeatures& cached);

}  // namespace hengshi::cache
