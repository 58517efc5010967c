#include "server/key_store.h"

#include "server/http_exchange.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>

#include "core/yaml_fields.h"
#include "server/auth_metrics.h"

namespace hengshi::server {
namespace {

using yaml_fields::FieldError;
using yaml_fields::join;
using yaml_fields::read;
using yaml_fields::reject_unknown;

std::optional<Sha256> from_hex(const std::string& text) {
  if (text.size() != 64) return std::nullopt;
  Sha256 out{};
  for (std::size_t i = 0; i < 32; ++i) {
    int value = 0;
    for (std::size_t j = 0; j < 2; ++j) {
      char c = text[2 * i + j];
      int digit = c >= '0' && c <= '9'   ? c - '0'
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                         : -1;
      if (digit < 0) return std::nullopt;
      value = value * 16 + digit;
    }
    out[i] = static_cast<unsigned char>(value);
  }
  return out;
}

ClientKey parse_key(const YAML::Node& node, const std::string& path) {
  reject_unknown(node, path, {"name", "sha256", "models", "pools", "rpm", "tpm", "budget", "cache_scope", "key"});
  if (node["key"]) {
    throw FieldError{
        join(path, "key"),
        "the key itself is never stored; put its SHA-256 in sha256 (`hengshi hash-key`)"};
  }
  ClientKey key;
  read(node, path, "name", key.name);
  if (key.name.empty()) throw FieldError{join(path, "name"), "is required"};
  std::string hex;
  read(node, path, "sha256", hex);
  if (hex.empty())
    throw FieldError{join(path, "sha256"), "is required (`hengshi hash-key` prints it)"};
  auto digest = from_hex(hex);
  if (!digest) throw FieldError{join(path, "sha256"), "must be 64 hex digits (a SHA-256)"};
  key.digest = *digest;
  read(node, path, "models", key.models);
  read(node, path, "pools", key.pools);
  if (node["models"] && key.models.empty()) {
    throw FieldError{join(path, "models"),
                     "is empty, so the key could use no model (omit it for all)"};
  }
  if (node["pools"] && key.pools.empty()) {
    throw FieldError{join(path, "pools"), "is empty (omit it for all pools)"};
  }
  read(node, path, "rpm", key.rpm);
  read(node, path, "tpm", key.tpm);
  if (key.rpm < 0 || (node["rpm"] && key.rpm == 0))
    throw FieldError{join(path, "rpm"), "must be > 0"};
  if (key.tpm < 0 || (node["tpm"] && key.tpm == 0))
    throw FieldError{join(path, "tpm"), "must be > 0"};
  read(node, path, "cache_scope", key.cache_scope);
  if (key.cache_scope.empty()) throw FieldError{join(path, "cache_scope"), "must not be empty (default: shared)"};
  if (node["budget"]) {
    double budget = 0;
    read(node, path, "budget", budget);
    if (!(budget >= 0)) throw FieldError{join(path, "budget"), "must be >= 0"};
    key.budget = budget;
  }
  return key;
}

bool contains(const std::vector<std::string>& list, const std::string& value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

}  // namespace

Sha256 sha256(std::string_view data) {
  // Fetched once: EVP_sha256() makes OpenSSL 3 look the algorithm up again on every call, which
  // cost more than the hash itself on the request path (it runs for every keyed request).
  static EVP_MD* const kSha256 = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  Sha256 out{};
  unsigned int length = 0;
  EVP_Digest(data.data(), data.size(), out.data(), &length, kSha256 ? kSha256 : EVP_sha256(), nullptr);
  return out;
}

std::string to_hex(const Sha256& digest) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(64);
  for (unsigned char byte : digest) {
    out.push_back(kDigits[byte >> 4]);
    out.push_back(kDigits[byte & 0xf]);
  }
  return out;
}

bool ClientKey::allows_model(const std::string& model) const {
  return models.empty() || contains(models, model);
}

bool ClientKey::allows_pool(const std::string& pool) const {
  return pools.empty() || contains(pools, pool);
}

std::shared_ptr<const ClientKey> KeySet::find(std::string_view secret) const {
  const Sha256 presented = sha256(secret);
  std::shared_ptr<const ClientKey> found;
  for (const auto& key : keys) {
    // CRYPTO_memcmp's time does not depend on where the bytes differ; every key is compared.
    const bool match = CRYPTO_memcmp(presented.data(), key->digest.data(), presented.size()) == 0;
    if (match) found = key;
  }
  return found;
}

std::shared_ptr<const ClientKey> KeyStore::authenticate(std::string_view secret, ConnectionMemo& memo) const {
  std::shared_ptr<const KeySet> set = keys();
  if (memo.proved_key && memo.proved_in == set && memo.proved_secret.size() == secret.size() &&
      CRYPTO_memcmp(memo.proved_secret.data(), secret.data(), secret.size()) == 0) {
    return memo.proved_key;
  }
  std::shared_ptr<const ClientKey> key = set->find(secret);
  if (key) {
    memo.proved_secret.assign(secret);
    memo.proved_in = std::move(set);
    memo.proved_key = key;
  }
  return key;
}

Result<std::shared_ptr<const KeySet>> parse_keys(const std::string& yaml_text,
                                                 const std::string& source) {
  auto set = std::make_shared<KeySet>();
  set->source = source;
  try {
    const YAML::Node root = YAML::Load(yaml_text);
    if (!root || root.IsNull()) throw FieldError{"keys", "is required (a list of keys)"};
    reject_unknown(root, "", {"keys"});
    const YAML::Node keys = root["keys"];
    if (!keys || !keys.IsSequence())
      throw FieldError{"keys", "is required and must be a list of keys"};
    std::set<std::string> names;
    std::set<Sha256> digests;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      const std::string path = "keys[" + std::to_string(i) + "]";
      ClientKey key = parse_key(keys[i], path);
      if (!names.insert(key.name).second) {
        throw FieldError{join(path, "name"), "'" + key.name + "' is used twice"};
      }
      if (!digests.insert(key.digest).second) {
        throw FieldError{join(path, "sha256"), "the same key is listed twice"};
      }
      set->keys.push_back(std::make_shared<const ClientKey>(std::move(key)));
    }
  } catch (const FieldError& e) {
    return Error{"keys_invalid", source + ": " + e.field + ": " + e.reason};
  } catch (const YAML::Exception& e) {
    return Error{"keys_invalid",
                 source + ": line " + std::to_string(e.mark.line + 1) + ": " + e.msg};
  }
  return std::shared_ptr<const KeySet>(std::move(set));
}

Result<std::shared_ptr<const KeySet>> load_keys_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error{"keys_unreadable", path + ": cannot open keys file (server.keys_file)"};
  std::stringstream text;
  text << in.rdbuf();
  return parse_keys(text.str(), path);
}

std::string_view bearer_token(std::string_view authorization) {
  constexpr std::string_view kScheme = "bearer ";
  if (authorization.size() <= kScheme.size()) return {};
  for (std::size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != kScheme[i]) return {};
  }
  std::string_view token = authorization.substr(kScheme.size());
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
  return token;
}

Result<std::unique_ptr<KeyStore>> KeyStore::open(const std::string& path) {
  FileStamp stamp = stamp_files({path});
  auto keys = load_keys_file(path);
  if (!keys) return keys.error();
  AuthMetrics::set_keys(static_cast<double>((*keys)->keys.size()));
  return std::unique_ptr<KeyStore>(new KeyStore(path, std::move(*keys), std::move(stamp)));
}

KeyStore::KeyStore(std::string path, std::shared_ptr<const KeySet> keys, FileStamp stamp)
    : path_(std::move(path)), keys_(std::move(keys)), watch_(std::move(stamp)) {}

Result<std::size_t> KeyStore::reload(const std::string& trigger) {
  std::lock_guard lock(reload_mutex_);
  auto stamp_before = stamp();
  auto keys = load_keys_file(path_);
  // Remembered even when the file is bad: the watcher retries only after the next change.
  watch_.loaded(stamp_before);
  if (!keys) {
    AuthMetrics::count_reload("rejected");
    spdlog::error("keys reload ({}) rejected, keeping {} key(s): {}", trigger,
                  keys_.load()->keys.size(), keys.error().message);
    return keys.error();
  }
  const std::size_t count = (*keys)->keys.size();
  keys_.store(std::move(*keys));
  AuthMetrics::count_reload("applied");
  AuthMetrics::set_keys(static_cast<double>(count));
  spdlog::info("keys reload ({}): {} key(s) from {}", trigger, count, path_);
  return count;
}

void KeyStore::poll() {
  {
    std::lock_guard lock(reload_mutex_);
    if (!watch_.ready(stamp())) return;
  }
  (void)reload("file change");
}

}  // namespace hengshi::server
