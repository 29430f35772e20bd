#include "base/signals.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>

#include "base/error.hpp"

namespace tpt {

namespace {

constexpr int kSignals[] = {SIGTERM, SIGINT};

std::mutex g_mu;                    // installs and removals
int g_users = 0;                    // live SignalStop objects
struct sigaction g_old[2];          // the dispositions before ours
std::atomic<int> g_received{0};     // lock-free: written in the handler
std::atomic<bool> g_restored{false};

static_assert(std::atomic<int>::is_always_lock_free, "the handler needs a lock-free flag");

void put_back_old() noexcept {
  // sigaction is async-signal-safe; so is this function.
  if (g_restored.exchange(true)) return;
  for (int i = 0; i < 2; ++i) sigaction(kSignals[i], &g_old[i], nullptr);
}

extern "C" void on_stop_signal(int signo) {
  int saved = errno;
  // First: a second signal acts as it would have without us, also one that
  // comes to another thread while this handler runs (or once the line
  // below has been read).
  put_back_old();
  int none = 0;
  if (g_received.compare_exchange_strong(none, signo)) {
    const char *msg = signo == SIGTERM
                          ? "\ntptrain: SIGTERM: training stops at the next step boundary (a ModelSaver saves there); "
                            "send it again to end the process now\n"
                          : "\ntptrain: SIGINT: training stops at the next step boundary (a ModelSaver saves there); "
                            "press Ctrl-C again to end the process now\n";
    ssize_t ignored = ::write(STDERR_FILENO, msg, std::strlen(msg));
    (void)ignored;
  }
  errno = saved;
}

}  // namespace

SignalStop::SignalStop() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_users++ > 0) return;
  g_received.store(0);
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  for (int s : kSignals) sigaddset(&sa.sa_mask, s);
  sa.sa_flags = SA_RESTART | SA_ONSTACK;  // SA_ONSTACK: safe on a Go thread's small stack too
  for (int i = 0; i < 2; ++i) {
    if (sigaction(kSignals[i], &sa, &g_old[i]) != 0) {
      int e = errno;
      for (int k = 0; k < i; ++k) sigaction(kSignals[k], &g_old[k], nullptr);
      --g_users;
      fail(TPT_ERR_INTERNAL, std::string("cannot install the ") + signal_name(kSignals[i]) +
                                 " handler (stop_on_signals): " + std::strerror(e));
    }
  }
  g_restored.store(false);
}

SignalStop::~SignalStop() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (--g_users > 0) return;
  put_back_old();
  g_received.store(0);
}

int SignalStop::received() noexcept { return g_received.load(std::memory_order_relaxed); }

const char *signal_name(int signo) noexcept {
  switch (signo) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGHUP: return "SIGHUP";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    default: return "a signal";
  }
}

}  // namespace tpt
