// The exception barrier every C entry point goes through: no C++ exception
// crosses the ABI. Each exception type becomes a tpt_status whose message starts
// with the name of the entry point.
#pragma once

#include <cxxabi.h>

#include <c10/util/Exception.h>

#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <utility>

#include "base/error.hpp"
#include "capi/status.hpp"
#include "loop/callback.hpp"
#include "tptrain.h"

namespace tpt::capi {

// "fn: message", without LibTorch's trailing newlines.
inline std::string prefixed(const char *fn, const char *message) {
  std::string text = std::string(fn) + ": " + (message ? message : "");
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

// Runs `body` and converts whatever it throws into a status.
template <class F>
__attribute__((always_inline)) inline tpt_status *guard(const char *fn, F &&body) {
  // not noexcept: a forced unwind must pass through
  try {
    std::forward<F>(body)();
    return nullptr;
  } catch (const abi::__forced_unwind &) {
    throw;  // thread cancellation must keep unwinding; it is not an error
  } catch (const tpt::StopTraining &stop) {
    return make_status(TPT_STOP, stop.what());
  } catch (const tpt::Error &e) {
    return make_status(e.code(), e.passthrough() ? std::string(e.what()) : prefixed(fn, e.what()));
  } catch (const c10::Error &e) {
    return make_status(TPT_ERR_BACKEND, prefixed(fn, e.what_without_backtrace()));
  } catch (const std::bad_alloc &) {
    return out_of_memory_status();
  } catch (const std::exception &e) {
    // LibTorch also throws plain std::exceptions (e.g. std::runtime_error from
    // reshape's size inference); tptrain's own failures are tpt::Error.
    return make_status(TPT_ERR_BACKEND, prefixed(fn, e.what()));
  } catch (...) {
    return make_status(TPT_ERR_UNKNOWN, prefixed(fn, "unknown exception"));
  }
}

// (The error paths of argument checks, throw_null_argument and
// throw_not_live in status.hpp, are out of line so that the checks stay a
// compare and a branch on the hot path.)

// Throws TPT_ERR_INVALID_ARGUMENT naming `name` when `p` is NULL.
template <class T>
inline T *require(T *p, const char *name) {
  if (__builtin_expect(p == nullptr, 0)) throw_null_argument(name);
  return p;
}

}  // namespace tpt::capi
