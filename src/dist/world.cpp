// The rendezvous (torchrun's contract) and the c10d process group.
#include "dist/world.hpp"

#include <ATen/core/Tensor.h>
#ifdef TPT_HAVE_GLOO
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#endif
#include <c10/macros/Macros.h>
#ifdef C10_USE_GLOG
#include <glog/logging.h>
#endif

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>
#include <climits>
#include <cstdlib>
#include <string>

#include "base/error.hpp"
#include "base/torch_compat.hpp"

namespace tpt::dist {

namespace {

// A whole number in [lo, hi] from `text`; errors name `what`.
int whole_number(const char *text, const std::string &what, int lo, int hi) {
  errno = 0;
  char *end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || errno == ERANGE || v < lo || v > hi)
    invalid_argument(what + " is \"" + text + "\": it must be a whole number from " + std::to_string(lo) + " to " +
                     std::to_string(hi));
  return static_cast<int>(v);
}

}  // namespace

Rendezvous rendezvous(const WorldOptions &o, const std::function<const char *(const char *)> &getenv) {
  auto env = [&](const char *name) -> const char * {
    const char *v = getenv ? getenv(name) : std::getenv(name);
    return v && *v ? v : nullptr;
  };
  // An option, else the variable, else `fallback` (INT_MIN: required).
  auto number = [&](int option, const char *option_name, const char *variable, int lo, int hi, int fallback) {
    if (option != -1) {
      if (option < lo || option > hi)
        invalid_argument(std::string(option_name) + " is " + std::to_string(option) + ": it must be from " +
                         std::to_string(lo) + " to " + std::to_string(hi));
      return option;
    }
    if (const char *v = env(variable)) return whole_number(v, variable, lo, hi);
    if (fallback == INT_MIN)
      invalid_argument(std::string("the ") + option_name + " is not known: set " + variable +
                       " (tools/tptrain-run and torchrun set it) or the option " + option_name);
    return fallback;
  };
  Rendezvous r;
  // A one-process job needs no address or port of its own choosing: its
  // store is on this machine, at any free port (0) unless one is given.
  const char *world = env("WORLD_SIZE");
  const bool one_process = o.world_size == 1 || (o.world_size == -1 && world && std::string(world) == "1");
  if (!o.master_addr.empty()) r.master_addr = o.master_addr;
  else if (const char *v = env("MASTER_ADDR")) r.master_addr = v;
  else if (one_process) r.master_addr = "127.0.0.1";
  else
    invalid_argument("the master address is not known: set MASTER_ADDR (tools/tptrain-run and torchrun set it) or "
                     "the option master_addr");
  r.master_port = number(o.master_port, "master_port", "MASTER_PORT", 0, 65535, one_process ? 0 : INT_MIN);
  r.world_size = number(o.world_size, "world_size", "WORLD_SIZE", 1, 1 << 20, INT_MIN);
  if (r.master_port == 0 && r.world_size > 1)
    invalid_argument("the master port is 0 (any free port), which only a one-process job can use: the other " +
                     std::to_string(r.world_size - 1) + " rank(s) could not find it; give rank 0's port");
  r.rank = number(o.rank, "rank", "RANK", 0, r.world_size - 1, INT_MIN);
  // Without LOCAL_WORLD_SIZE: 1, or the world when the local rank is an option.
  r.local_world_size = number(-1, "local_world_size", "LOCAL_WORLD_SIZE", 1, r.world_size, o.local_rank != -1 ? r.world_size : 1);
  if (o.local_rank == -1 && !env("LOCAL_WORLD_SIZE"))
    if (const char *v = env("LOCAL_RANK")) {
      const int local = whole_number(v, "LOCAL_RANK", 0, r.world_size - 1);
      if (local > 0)
        invalid_argument("LOCAL_RANK is " + std::to_string(local) +
                         " but LOCAL_WORLD_SIZE is not set: set LOCAL_WORLD_SIZE to the number of processes of the "
                         "job on this machine (tools/tptrain-run and torchrun set both), or give the option local_rank");
    }
  r.local_rank = number(o.local_rank, "local_rank", "LOCAL_RANK", 0, r.local_world_size - 1, 0);
  if (const char *v = env("TORCHELASTIC_RUN_ID")) r.run_id = v;
  if (o.timeout.count() < 1) invalid_argument("the timeout is " + std::to_string(o.timeout.count()) + " ms: it must be at least 1");
  r.timeout = o.timeout;
  return r;
}

#ifdef TPT_HAVE_GLOO

struct World::Impl {
  Rendezvous r;
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg;
  std::string where;   // "rank R of W"
  std::string prefix;  // the job's keys in the store
  std::chrono::milliseconds interval{500};
  std::atomic<int64_t> started{0};  // collectives started by this rank
  std::atomic<int64_t> beats{0};
  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  std::thread heart;

  c10::intrusive_ptr<c10d::Store> client(std::chrono::milliseconds timeout) const;
  std::string beat_value() { return std::to_string(beats.fetch_add(1) + 1) + " " + std::to_string(started.load()); }
  void heartbeat();
  std::string verdict();
  // Runs a collective (or its wait); its errors become TPT_ERR_BACKEND
  // naming `what` and, for a failed collective, the verdict on the ranks.
  template <class F>
  void collective(const std::string &what, F &&fn);
};

namespace {

// c10d and Gloo log through glog in LibTorch builds that use it (Debian's);
// a glog nobody initialised prints "WARNING: Logging before
// InitGoogleLogging() is written to STDERR" before their first line.
// Initialise it once, still writing to stderr, unless the host did.
void quiet_glog() {
#ifdef C10_USE_GLOG
  static std::once_flag once;
  std::call_once(once, [] {
    if (google::IsGoogleLoggingInitialized()) return;
    FLAGS_logtostderr = true;
    google::InitGoogleLogging("tptrain");
  });
#endif
}

bool loopback(const std::string &addr) { return addr == "localhost" || addr.rfind("127.", 0) == 0 || addr == "::1"; }

// Runs a c10d call; its errors become TPT_ERR_BACKEND naming `what`.
template <class F>
void c10d_call(const std::string &what, F &&fn) {
  try {
    fn();
  } catch (const Error &) {
    throw;
  } catch (const c10::Error &e) {
    fail(TPT_ERR_BACKEND, what + ": " + first_line(e.what_without_backtrace()));
  } catch (const std::exception &e) {
    fail(TPT_ERR_BACKEND, what + ": " + first_line(e.what()));
  }
}

// Whether something accepts TCP connections at addr:port before `deadline`,
// tried every 50 ms. A rank other than 0 waits for rank 0's store so, with
// the deadline its timeout sets: LibTorch 2.x's TCPStore client retries a
// failed connection with a fresh timeout and gives up only after 1.5 to 2
// times the one it was given, logging a backtrace at each try.
bool wait_for_listener(const std::string &addr, int port, std::chrono::steady_clock::time_point deadline) {
  using Clock = std::chrono::steady_clock;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  const std::string service = std::to_string(port);
  for (;;) {
    addrinfo *found = nullptr;
    if (getaddrinfo(addr.c_str(), service.c_str(), &hints, &found) == 0) {
      for (addrinfo *a = found; a; a = a->ai_next) {
        const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        bool up = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0;
        if (!up && errno == EINPROGRESS) {
          const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
          pollfd p{fd, POLLOUT, 0};
          int err = 0;
          socklen_t len = sizeof err;
          up = ::poll(&p, 1, static_cast<int>(std::clamp<long long>(left, 1, 1000))) == 1 &&
               ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
        }
        ::close(fd);
        if (up) {
          freeaddrinfo(found);
          return true;
        }
      }
      freeaddrinfo(found);
    }
    if (Clock::now() + std::chrono::milliseconds(50) >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

std::vector<uint8_t> bytes(const std::string &s) { return {s.begin(), s.end()}; }
std::string text(const std::vector<uint8_t> &b) { return {b.begin(), b.end()}; }

// "beats started" from a heartbeat key.
std::pair<int64_t, int64_t> parse_beat(const std::string &v) {
  long long b = -1, s = -1;
  if (std::sscanf(v.c_str(), "%lld %lld", &b, &s) != 2) return {-1, -1};
  return {b, s};
}

}  // namespace

c10::intrusive_ptr<c10d::Store> World::Impl::client(std::chrono::milliseconds timeout) const {
  c10d::TCPStoreOptions so;
  so.port = static_cast<std::uint16_t>(r.master_port);
  so.isServer = false;
  so.waitWorkers = false;
  so.timeout = timeout;
  compat::classic_tcp_store(so);
  auto tcp = c10::make_intrusive<c10d::TCPStore>(r.master_addr, so);
  return c10::make_intrusive<c10d::PrefixStore>(prefix, tcp);
}

void World::Impl::heartbeat() {
  c10::intrusive_ptr<c10d::Store> own;
  std::unique_lock<std::mutex> lock(mu);
  while (!stopping) {
    lock.unlock();
    try {
      if (!own) own = client(std::max(interval * 4, std::chrono::milliseconds(2000)));
      own->set("hb/" + std::to_string(r.rank), bytes(beat_value()));
    } catch (const std::exception &) {
      own.reset();  // the store is gone (rank 0 ended): the collectives will say so
    }
    lock.lock();
    cv.wait_for(lock, interval, [this] { return stopping; });
  }
}

// Which ranks are at fault, in words; every rank gets the same verdict.
std::string World::Impl::verdict() {
  const int world = r.world_size, me = r.rank;
  try {
    auto s = client(std::min(r.timeout, std::chrono::milliseconds(10000)));
    std::string v;
    std::vector<int> lost;
    auto read = [&] {
      std::vector<std::pair<int64_t, int64_t>> out;
      for (int i = 0; i < world; ++i) out.push_back(parse_beat(text(s->get("hb/" + std::to_string(i)))));
      return out;
    };
    if (s->check({"verdict"})) {
      v = text(s->get("verdict"));
    } else {
      const auto before = read();
      const auto wait = std::max(interval * 3, std::chrono::milliseconds(300));
      std::this_thread::sleep_for(wait);
      const auto after = read();
      std::string names;
      for (int i = 0; i < world; ++i)
        if (i != me && after[static_cast<size_t>(i)].first == before[static_cast<size_t>(i)].first) {
          lost.push_back(i);
          names += (names.empty() ? "" : ", ") + std::to_string(i);
        }
      std::string list;
      for (int i : lost) list += (list.empty() ? "" : ",") + std::to_string(i);
      std::string message;
      if (!lost.empty()) {
        message = (lost.size() == 1 ? "rank " + names + " is lost" : "ranks " + names + " are lost") +
                  " (no heartbeat for " + std::to_string(wait.count()) + " ms: the process died or hangs)";
      } else {
        int64_t most = 0;
        for (const auto &b : after) most = std::max(most, b.second);
        std::string behind;
        for (int i = 0; i < world; ++i)
          if (after[static_cast<size_t>(i)].second < most)
            behind += (behind.empty() ? "" : ", ") + std::to_string(i) + " (" +
                      std::to_string(after[static_cast<size_t>(i)].second) + ")";
        message = behind.empty() ? "every rank is alive and started the same collectives: one is slower than the timeout "
                                   "(" + std::to_string(r.timeout.count()) + " ms)"
                                 : "every rank is alive, but rank(s) " + behind + " started fewer collectives than the others (" +
                                       std::to_string(most) + "): stuck, or running other code than the others";
      }
      // The first verdict stands.
      v = text(s->compareSet("verdict", {}, bytes(list + "|" + message)));
    }
    s->set("read/" + std::to_string(me), bytes("1"));
    const size_t bar = v.find('|');
    const std::string list = v.substr(0, bar), message = bar == std::string::npos ? v : v.substr(bar + 1);
    if (me == 0) {  // keep the store up until every live rank has the verdict
      std::vector<std::string> keys;
      for (int i = 1; i < world; ++i)
        if (("," + list + ",").find("," + std::to_string(i) + ",") == std::string::npos) keys.push_back("read/" + std::to_string(i));
      const auto deadline = std::chrono::steady_clock::now() + r.timeout + std::chrono::milliseconds(2000);
      while (!keys.empty() && !s->check(keys) && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return message;
  } catch (const std::exception &) {
    if (me == 0) return "the job's store could not be read to say which rank failed";
    return "rank 0 is lost (the store its process serves at " + r.master_addr + ":" + std::to_string(r.master_port) +
           " cannot be reached)";
  }
}

template <class F>
void World::Impl::collective(const std::string &what, F &&fn) {
  try {
    c10d_call(what, std::forward<F>(fn));
  } catch (const Error &e) {
    std::string message = e.what();
    message += "; " + verdict();
    fail(TPT_ERR_BACKEND, message);
  }
}

World::World(const Rendezvous &r)
    : impl_(std::make_unique<Impl>()), rank_(r.rank), size_(r.world_size), local_rank_(r.local_rank) {
  impl_->r = r;
  impl_->where = "rank " + std::to_string(r.rank) + " of " + std::to_string(r.world_size);
  impl_->prefix = "tptrain/" + r.run_id + "/";
  impl_->interval = std::clamp(r.timeout / 8, std::chrono::milliseconds(50), std::chrono::milliseconds(500));
  quiet_glog();
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const std::string at = r.master_addr + ":" + std::to_string(r.master_port);
  if (r.rank != 0 && !wait_for_listener(r.master_addr, r.master_port, start + r.timeout))
    fail(TPT_ERR_BACKEND, "the rendezvous at " + at + " (" + impl_->where + "): rank 0's store did not come up within " +
                              std::to_string(r.timeout.count()) + " ms");
  c10d_call("the rendezvous at " + at + " (" + impl_->where + ")",
            [&] {
              c10d::TCPStoreOptions so;
              so.port = static_cast<std::uint16_t>(r.master_port);
              so.isServer = r.rank == 0;
              so.numWorkers = static_cast<std::size_t>(r.world_size);
              so.waitWorkers = true;
              so.timeout = std::max(r.timeout - std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start),
                                    std::chrono::milliseconds(1));
              compat::classic_tcp_store(so);
              auto tcp = c10::make_intrusive<c10d::TCPStore>(r.master_addr, so);
              if (impl_->r.master_port == 0) impl_->r.master_port = tcp->getPort();  // the free port it took
              impl_->store = c10::make_intrusive<c10d::PrefixStore>(impl_->prefix, tcp);
              // The first beat before the process group forms: every rank's key
              // exists once it has.
              impl_->store->set("hb/" + std::to_string(r.rank), bytes(impl_->beat_value()));
              // Every rank's first beat, within what is left of the timeout: a
              // rank that never comes fails the rendezvous once, at the timeout
              // (the process group's own wait for its peers would be a second one).
              std::vector<std::string> keys;
              for (int i = 0; i < r.world_size; ++i) keys.push_back("hb/" + std::to_string(i));
              const auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
              try {
                impl_->store->wait(keys, std::max(r.timeout - spent, std::chrono::milliseconds(1)));
              } catch (const std::exception &) {
                // Which ranks, asked on a connection of its own (the timed-out
                // one may be unusable); rank 0's store may be gone already.
                std::string missing;
                int n = 0;
                try {
                  auto s = impl_->client(std::chrono::milliseconds(1000));
                  for (int i = 0; i < r.world_size; ++i)
                    if (!s->check({keys[static_cast<size_t>(i)]})) missing += (n++ ? ", " : "") + std::to_string(i);
                } catch (const std::exception &) {
                  missing.clear();
                  n = 0;
                }
                const std::string who = n == 0   ? "not every rank joined"
                                        : n == 1 ? "rank " + missing + " did not join"
                                                 : "ranks " + missing + " did not join";
                fail(TPT_ERR_BACKEND, "the rendezvous at " + at + " (" +
                                          impl_->where + "): " + who + " within " + std::to_string(r.timeout.count()) +
                                          " ms");
              }
              auto opts = c10d::ProcessGroupGloo::Options::create(r.timeout);
              if (const char *ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname)
                opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
              else if (loopback(r.master_addr))
                opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
              else
                opts->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
              impl_->pg = c10::make_intrusive<c10d::ProcessGroupGloo>(impl_->store, r.rank, r.world_size, opts);
            });
  impl_->heart = std::thread([impl = impl_.get()] { impl->heartbeat(); });
}

World::~World() { stop_heartbeat_for_testing(); }

void World::stop_heartbeat_for_testing() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->cv.notify_all();
  if (impl_->heart.joinable()) impl_->heart.join();
}

// Gloo's lists hold one tensor per device (summed together): one here.
void World::all_reduce(at::Tensor &tensor) {
  std::vector<at::Tensor> one{tensor};
  impl_->started.fetch_add(1);
  impl_->collective("all-reduce (" + impl_->where + ")", [&] { impl_->pg->allreduce(one)->wait(); });
}

namespace {
class GlooPending final : public World::Pending {
 public:
  GlooPending(World::Impl *impl, c10::intrusive_ptr<c10d::Work> work, std::string what)
      : impl_(impl), work_(std::move(work)), what_(std::move(what)) {}
  void wait() override {
    impl_->collective(what_, [&] { work_->wait(); });
  }

 private:
  World::Impl *impl_;
  c10::intrusive_ptr<c10d::Work> work_;
  std::string what_;
};
}  // namespace

std::unique_ptr<World::Pending> World::start_all_reduce(at::Tensor &tensor) {
  std::vector<at::Tensor> one{tensor};
  c10::intrusive_ptr<c10d::Work> work;
  const std::string what = "all-reduce (" + impl_->where + ")";
  impl_->started.fetch_add(1);
  impl_->collective(what, [&] { work = impl_->pg->allreduce(one); });
  return std::make_unique<GlooPending>(impl_.get(), std::move(work), what);
}

void World::broadcast(const std::vector<at::Tensor> &tensors, int root) {
  c10d::BroadcastOptions bo;
  bo.rootRank = root;
  impl_->collective("broadcast from rank " + std::to_string(root) + " (" + impl_->where + ")", [&] {
    for (const auto &t : tensors) {
      std::vector<at::Tensor> one{t};
      impl_->started.fetch_add(1);
      impl_->pg->broadcast(one, bo)->wait();
    }
  });
}

void World::barrier() {
  impl_->started.fetch_add(1);
  impl_->collective("barrier (" + impl_->where + ")", [&] { impl_->pg->barrier()->wait(); });
}

#else  // no c10d Gloo in this LibTorch: a World cannot be made

struct World::Impl {};

World::World(const Rendezvous &) {
  fail(TPT_ERR_UNSUPPORTED, "distributed training needs c10d's Gloo process group, and this build of tptrain has none "
                            "(install libgloo-dev and reconfigure: meson setup --reconfigure -Dgloo=enabled)");
}
World::~World() = default;
void World::stop_heartbeat_for_testing() {}
void World::all_reduce(at::Tensor &) {}
std::unique_ptr<World::Pending> World::start_all_reduce(at::Tensor &) { return nullptr; }
void World::broadcast(const std::vector<at::Tensor> &, int) {}
void World::barrier() {}

#endif

}  // namespace tpt::dist
