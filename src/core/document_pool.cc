#include "core/document_pool.h"

#include <algorithm>
#include <atomic>
#include <vector>

namespace hengshi {

std::shared_ptr<simdjson::dom::document> pooled_document() {
  if constexpr (!kDocumentPooling) return std::make_shared<simdjson::dom::document>();
  struct Pool {
    std::vector<std::shared_ptr<simdjson::dom::document> > documents;
    // Requests end roughly in the order they began: the oldest handed out is tried first.
    std::size_t next = 0;
  };
  thread_local Pool pool;
  const std::size_t count = pool.documents.size();
  // A few from the oldest: when they are all busy, so is the rest, more or less (more requests
  // in flight than the pool holds), and a search of every slot would be paid by each request.
  for (std::size_t i = 0; i < std::min(count, kSearchedDocuments); ++i) {
    const std::size_t at = (pool.next + i) % count;
    std::shared_ptr<simdjson::dom::document>& slot = pool.documents[at];
    if (slot.use_count() != 1) continue;  // still some request's
    // Its last user may have run on another thread.
    std::atomic_thread_fence(std::memory_order_acquire);
    pool.next = (at + 1) % count;
    if (slot->capacity() > kMaxPooledBytes) slot = std::make_shared<simdjson::dom::document>();
    return slot;
  }
  auto made = std::make_shared<simdjson::dom::document>();
  if (count < kPooledDocuments) pool.documents.push_back(made);
  return made;
}

}  // namespace hengshi
