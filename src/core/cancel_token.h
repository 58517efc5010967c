// CancelToken: a one-shot cancellation signal shared by a request's parts.
// Boost 1.74 Asio has no per-operation cancellation slots, so cancellation is delivered by
// callbacks that close the socket being waited on. Not thread-safe: a token and every callback
// registered on it must live on one strand (the client connection's executor).
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>

namespace hengshi {

class CancelToken {
 public:
  using Callback = std::function<void()>;

  bool cancelled() const { return state_->cancelled; }

  // Fires every registered callback once; later registrations fire immediately.
  void cancel() {
    if (state_->cancelled) return;
    state_->cancelled = true;
    auto callbacks = std::move(state_->callbacks);
    for (auto& [id, cb] : callbacks) cb();
  }

  // Registration lasts until the returned handle is destroyed.
  class Registration {
   public:
    Registration() = default;
    Registration(std::shared_ptr<void> state, std::size_t id) : state_(std::move(state)), id_(id) {}
    Registration(Registration&&) = default;
    Registration& operator=(Registration&&) = default;
    ~Registration();

   private:
    std::shared_ptr<void> state_;
    std::size_t id_ = 0;
  };

  [[nodiscard]] Registration on_cancel(Callback cb) {
    if (state_->cancelled) {
      cb();
      return {};
    }
    auto id = ++state_->next_id;
    state_->callbacks.emplace(id, std::move(cb));
    return Registration(state_, id);
  }

  struct State {
    bool cancelled = false;
    std::size_t next_id = 0;
    std::map<std::size_t, Callback> callbacks;
  };

 private:
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

inline CancelToken::Registration::~Registration() {
  if (state_) static_cast<CancelToken::State*>(state_.get())->callbacks.erase(id_);
}

}  // namespace hengshi
