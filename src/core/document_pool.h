// pooled_document: a simdjson document for a request body, reused on the thread that made it.
//
// A request keeps its body's document (ChatRequest::parsed_body) until it ends; made fresh, that
// was three allocations per request (the shared control block, the tape at 8 bytes per byte of
// body, the strings), freed a moment later, and the tape touched cold. A thread keeps a few
// dozen documents instead and hands out one that nothing else holds any more: no allocation, and
// memory that is likely still in cache. A document is shared (a shadow call may keep the request
// past its answer), so it is free again only when the pool's is its last reference; one released
// on another thread is reused after an acquire fence, which pairs with shared_ptr's releasing
// count decrement. A document grown by a large body is not kept (see kMaxPooledBytes).
#pragma once

#include <memory>

#include <simdjson.h>

namespace hengshi {

// Under ASan (GCC says so with __SANITIZE_ADDRESS__, clang with __has_feature) every document is
// fresh: a view kept past its request then reads freed memory, which ASan reports, not a later
// request's bytes, which it cannot see.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kDocumentPooling = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kDocumentPooling = false;
#else
inline constexpr bool kDocumentPooling = true;
#endif
#else
inline constexpr bool kDocumentPooling = true;
#endif

// Documents kept per thread: about the requests one thread has in flight at once.
inline constexpr std::size_t kPooledDocuments = 64;
// Slots looked at per request, from the oldest handed out.
inline constexpr std::size_t kSearchedDocuments = 16;
// A document able to hold a body larger than this is dropped, not kept (its tape alone is 8
// bytes per byte of body).
inline constexpr std::size_t kMaxPooledBytes = 16 * 1024;

// A document no one else holds (its previous contents are overwritten by the next parse).
std::shared_ptr<simdjson::dom::document> pooled_document();

}  // namespace hengshi
