// Definitions of the opaque handle types and the checks that turn a NULL,
// freed or foreign pointer into a clear error instead of a crash; tensor
// scopes (the tensors a tower function or a callback makes belong to that
// call, see "Tensor scopes" in tptrain.h).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/SmallVector.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "capi/barrier.hpp"

// A tag at the start of every handle: a pointer whose tag is wrong is not a
// live handle of that type. free() clears the tag before releasing memory.
inline constexpr uint64_t kTensorMagic = 0x74707454656e7372ull;  // "tptTensr"
// A scoped tensor freed before its scope ended: the scope deletes the handle.
inline constexpr uint64_t kTensorFreedInScope = 0x74707446726565ull;  // "tptFree"
// A tensor of a TPT_SCOPE_EXPIRE scope that ended: released; the handle waits
// for tpt_tensor_free (a garbage-collected binding's finalizer or Close).
inline constexpr uint64_t kTensorExpired = 0x7470744578706972ull;  // "tptExpir"

namespace tpt::capi {
class TensorScope;
// Handles alive in the process (made by the library, not yet deleted).
inline std::atomic<int64_t> g_live_tensors{0};
}  // namespace tpt::capi

struct tpt_tensor {
  uint64_t magic = kTensorMagic;
  at::Tensor value;
  // Who deletes the handle: nullptr is the caller (tpt_tensor_free); a scope
  // deletes the handles it adopted; borrowed handles (a tower function's
  // inputs) belong to the library call that lent them, and free ignores them.
  tpt::capi::TensorScope *scope = nullptr;
  bool borrowed = false;
  bool counted = false;

  struct Borrow {};
  tpt_tensor(at::Tensor t, Borrow) : value(std::move(t)), borrowed(true) {}
  explicit tpt_tensor(at::Tensor t) : value(std::move(t)), counted(true) {
    tpt::capi::g_live_tensors.fetch_add(1, std::memory_order_relaxed);
  }
  ~tpt_tensor() {
    if (counted) tpt::capi::g_live_tensors.fetch_sub(1, std::memory_order_relaxed);
  }
  // Only for containers of borrowed handles (see BorrowedTensors in capi/model.cpp).
  tpt_tensor(tpt_tensor &&o) noexcept
      : magic(o.magic), value(std::move(o.value)), scope(o.scope), borrowed(o.borrowed), counted(o.counted) {
    o.counted = false;
  }
  tpt_tensor(const tpt_tensor &) = delete;
  tpt_tensor &operator=(const tpt_tensor &) = delete;
};

namespace tpt::capi {

[[noreturn]] void throw_tensor_not_live(const tpt_tensor *t, const char *name);

inline const at::Tensor &tensor_arg(const tpt_tensor *t, const char *name) {
  require(t, name);
  if (__builtin_expect(t->magic != kTensorMagic, 0)) throw_tensor_not_live(t, name);
  return t->value;
}

// The innermost scope open on this thread (nullptr: none).
extern thread_local TensorScope *t_scope;

// A scope: opened by the library around a call into user code (tower
// function, trainer callback); every tensor handle made on this thread while
// it is the innermost one belongs to it and is released when it closes.
class TensorScope {
 public:
  // TPT_SCOPE_OFF opens a scope that adopts nothing: inside it, handles belong
  // to the caller as outside any call (around callbacks that give tensors
  // to the library through out-parameters, whatever scope encloses them).
  explicit TensorScope(tpt_scope_mode mode = TPT_SCOPE_FREE) : prev_(t_scope), mode_(mode) { t_scope = this; }
  ~TensorScope() {
    t_scope = prev_;
    close();
  }
  TensorScope(const TensorScope &) = delete;
  TensorScope &operator=(const TensorScope &) = delete;

  void adopt(tpt_tensor *h) {
    if (mode_ == TPT_SCOPE_OFF) return;
    h->scope = this;
    handles_.push_back(h);
  }
  // TPT_SCOPE_OFF hands the handles adopted so far to the caller.
  void set_mode(tpt_scope_mode mode) {
    mode_ = mode;
    if (mode == TPT_SCOPE_OFF) {
      for (tpt_tensor *h : handles_) h->scope = nullptr;
      handles_.clear();
    }
  }

 private:
  void close() noexcept {
    for (tpt_tensor *h : handles_) {
      if (h->magic == kTensorFreedInScope || mode_ == TPT_SCOPE_FREE) {
        h->magic = 0;
        delete h;
      } else {  // TPT_SCOPE_EXPIRE: release the tensor, keep the handle for its owner's free
        h->value.reset();
        h->magic = kTensorExpired;
        h->scope = nullptr;
      }
    }
    handles_.clear();
  }

  TensorScope *prev_;
  tpt_scope_mode mode_ = TPT_SCOPE_FREE;
  c10::SmallVector<tpt_tensor *, 16> handles_;
};

// Runs `call` (a call into host code) inside a scope of `mode` and returns
// what it returned: the scope closes before the caller looks at the result.
template <class F>
auto scoped_call(tpt_scope_mode mode, F &&call) -> decltype(call()) {
  TensorScope scope(mode);
  return call();
}

// Wraps a tensor in a new handle and stores it in *out; inside a scope the
// scope owns it.
inline void give(tpt_tensor **out, at::Tensor value) {
  auto *h = new tpt_tensor(std::move(value));
  if (TensorScope *s = t_scope) s->adopt(h);
  *out = h;
}

// Hands a handle made with new to the innermost scope, if any.
inline tpt_tensor *adopt(tpt_tensor *h) {
  if (h)
    if (TensorScope *s = t_scope) s->adopt(h);
  return h;
}

// A new handle that belongs to the caller even inside a scope.
inline void give_kept(tpt_tensor **out, at::Tensor value) { *out = new tpt_tensor(std::move(value)); }

}  // namespace tpt::capi
