#include "chain/attempt.h"

namespace hengshi::chain {

AttemptError from_upstream(const cloud::UpstreamError& error) {
  using Kind = cloud::UpstreamErrorKind;
  AttemptError out;
  out.kind = cloud::to_string(error.kind);
  out.upstream_kind = error.kind;
  out.api = error.to_api_error();
  out.upstream = error.upstream;
  out.retry_after_ms = error.retry_after_ms;
  out.member_open = error.member_open;
  switch (error.kind) {
    case Kind::cancelled:
      out.error_class = ErrorClass::cancelled;
      break;
    case Kind::client_error:
      // The request itself is wrong (bad parameters, context too long): no level will do better.
      out.error_class = ErrorClass::terminal;
      break;
    case Kind::overloaded:
      // A full bulkhead sheds load: spilling onto the next pool would only move the overload.
      out.error_class = ErrorClass::terminal;
      break;
    default: {
      // Judged as if nothing had reached the client: the chain holds pieces back until its commit
      // point and itself decides what "after the first byte" means (AttemptError::after_first_byte).
      cloud::UpstreamError before_first_byte = error;
      before_first_byte.after_first_byte = false;
      out.error_class = before_first_byte.retryable() ? ErrorClass::retryable : ErrorClass::next_level;
      // A call the pool's panic sent to an open member: one attempt, then the next level.
      if (error.member_open && out.error_class == ErrorClass::retryable) out.error_class = ErrorClass::next_level;
      break;
    }
  }
  out.after_first_byte = false;
  out.cloud_unreachable = error.kind == Kind::connect_failed || error.kind == Kind::connect_timeout ||
                          error.kind == Kind::ttft_timeout || error.kind == Kind::total_timeout;
  return out;
}

}  // namespace hengshi::chain
