// KeyStore: the gateway's client keys (issue 8 §2). A keys file (YAML) lists each key by name
// with the SHA-256 of its secret (never the secret), the models and pools it may use, optional
// requests/tokens-per-minute limits and a spend budget:
//
//   keys:
//     - name: team-a
//       sha256: <64 hex digits>       # `hengshi hash-key` prints it
//       models: [auto, edge]          # optional; absent = all
//       pools: [cloud-small]          # optional; absent = all
//       rpm: 600                      # optional
//       tpm: 100000                   # optional
//       budget: 25.0                  # optional, configured price units
//       cache_scope: team-a           # optional; keys with another scope never share cached answers
//
// Reload (SIGHUP, POST /admin/reload, a stable file change): the new set is parsed and validated
// off to the side, then swapped in atomically; a bad file keeps the running keys and logs why.
// Usage state (rate buckets, spend) lives in KeyLimits, keyed by name, so it survives reloads.
//
// Thread-safety: keys()/authenticate() are lock-free reads of an atomic snapshot and may run on
// any thread; reload()/poll() serialise on a mutex.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/stable_file_change.h"

namespace hengshi::server {

struct ConnectionMemo;  // server/http_exchange.h

using Sha256 = std::array<unsigned char, 32>;

Sha256 sha256(std::string_view data);
std::string to_hex(const Sha256& digest);

// One client key as configured. Immutable once loaded; shared with requests in flight.
struct ClientKey {
  std::string name;
  Sha256 digest{};
  std::vector<std::string> models;  // empty = every model
  std::vector<std::string> pools;   // empty = every pool
  std::int64_t rpm = 0;             // requests per minute; 0 = unlimited
  std::int64_t tpm = 0;             // tokens per minute; 0 = unlimited
  std::optional<double> budget;     // spend allowed, in the configured price unit
  std::string cache_scope = "shared";  // answers are cached and reused only within one scope

  bool allows_model(const std::string& model) const;
  bool allows_pool(const std::string& pool) const;
};

struct KeySet {
  std::string source;  // file it came from, for messages
  std::vector<std::shared_ptr<const ClientKey>> keys;

  // The key whose hash matches SHA-256(secret), or null. Every configured digest is compared in
  // constant time, with no early exit, so timing tells nothing about which bytes matched.
  std::shared_ptr<const ClientKey> find(std::string_view secret) const;
};

// Parses a keys file's text; errors name the source, the field (keys[i].sha256) and the reason.
Result<std::shared_ptr<const KeySet>> parse_keys(const std::string& yaml_text,
                                                 const std::string& source);
Result<std::shared_ptr<const KeySet>> load_keys_file(const std::string& path);

// The secret from an `Authorization: Bearer <key>` value; empty when the header has another shape.
std::string_view bearer_token(std::string_view authorization);

class KeyStore {
 public:
  // Loads `path`; an unreadable or invalid file is an error (the gateway refuses to start).
  static Result<std::unique_ptr<KeyStore>> open(const std::string& path);

  std::shared_ptr<const KeySet> keys() const { return keys_.load(); }
  std::shared_ptr<const ClientKey> authenticate(std::string_view secret) const {
    return keys()->find(secret);
  }
  // The same, remembering the proof in `memo` (one connection's): the same secret against the
  // same running key set is not hashed again. Comparing the connection's own previous bytes
  // tells an attacker nothing about other keys.
  std::shared_ptr<const ClientKey> authenticate(std::string_view secret, ConnectionMemo& memo) const;

  // Re-reads the file now; on error the running keys stay. Returns the number of keys loaded.
  Result<std::size_t> reload(const std::string& trigger);
  // For the file watcher: reloads once the file's size and mtime differ from the loaded ones and
  // were the same on two polls in a row, so a half-written file is never read.
  void poll();

 private:
  KeyStore(std::string path, std::shared_ptr<const KeySet> keys, FileStamp stamp);
  FileStamp stamp() const { return stamp_files({path_}); }

  std::string path_;
  std::atomic<std::shared_ptr<const KeySet>> keys_;
  std::mutex reload_mutex_;
  StableFileChange watch_;  // what the running keys were read from; guarded by reload_mutex_
};

}  // namespace hengshi::server
