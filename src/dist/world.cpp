// The rendezvous (torchrun's contract) and the c10d process group.
#include "dist/world.hpp"

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <string>

#include "core/error.hpp"

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
  if (!o.master_addr.empty()) r.master_addr = o.master_addr;
  else if (const char *v = env("MASTER_ADDR")) r.master_addr = v;
  else
    invalid_argument("the master address is not known: set MASTER_ADDR (tools/tptrain-run and torchrun set it) or "
                     "the option master_addr");
  r.master_port = number(o.master_port, "master_port", "MASTER_PORT", 1, 65535, INT_MIN);
  r.world_size = number(o.world_size, "world_size", "WORLD_SIZE", 1, 1 << 20, INT_MIN);
  r.rank = number(o.rank, "rank", "RANK", 0, r.world_size - 1, INT_MIN);
  r.local_world_size = number(-1, "local_world_size", "LOCAL_WORLD_SIZE", 1, r.world_size, 1);
  r.local_rank = number(o.local_rank, "local_rank", "LOCAL_RANK", 0, r.local_world_size - 1, 0);
  if (const char *v = env("TORCHELASTIC_RUN_ID")) r.run_id = v;
  if (o.timeout.count() < 1) invalid_argument("the timeout is " + std::to_string(o.timeout.count()) + " ms: it must be at least 1");
  r.timeout = o.timeout;
  return r;
}

struct World::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg;
  std::string where;  // "rank R of W"
};

namespace {

bool loopback(const std::string &addr) { return addr == "localhost" || addr.rfind("127.", 0) == 0 || addr == "::1"; }

// Runs a c10d call; its errors become TPT_ERR_BACKEND naming `what`.
template <class F>
void c10d_call(const std::string &what, F &&fn) {
  try {
    fn();
  } catch (const Error &) {
    throw;
  } catch (const c10::Error &e) {
    fail(TPT_ERR_BACKEND, what + ": " + e.what_without_backtrace());
  } catch (const std::exception &e) {
    fail(TPT_ERR_BACKEND, what + ": " + e.what());
  }
}

}  // namespace

World::World(const Rendezvous &r) : impl_(std::make_unique<Impl>()), rank_(r.rank), size_(r.world_size) {
  impl_->where = "rank " + std::to_string(r.rank) + " of " + std::to_string(r.world_size);
  c10d_call("the rendezvous at " + r.master_addr + ":" + std::to_string(r.master_port) + " (" + impl_->where + ")",
            [&] {
              c10d::TCPStoreOptions so;
              so.port = static_cast<std::uint16_t>(r.master_port);
              so.isServer = r.rank == 0;
              so.numWorkers = static_cast<std::size_t>(r.world_size);
              so.waitWorkers = true;
              so.timeout = r.timeout;
              auto tcp = c10::make_intrusive<c10d::TCPStore>(r.master_addr, so);
              impl_->store = c10::make_intrusive<c10d::PrefixStore>("tptrain/" + r.run_id, tcp);
              auto opts = c10d::ProcessGroupGloo::Options::create(r.timeout);
              if (const char *ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname)
                opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
              else if (loopback(r.master_addr))
                opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
              else
                opts->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
              impl_->pg = c10::make_intrusive<c10d::ProcessGroupGloo>(impl_->store, r.rank, r.world_size, opts);
            });
}

World::~World() = default;

// Gloo's lists hold one tensor per device (summed together): one here.
void World::all_reduce(at::Tensor &tensor) {
  std::vector<at::Tensor> one{tensor};
  c10d_call("all-reduce (" + impl_->where + ")", [&] { impl_->pg->allreduce(one)->wait(); });
}

namespace {
class GlooPending final : public World::Pending {
 public:
  GlooPending(c10::intrusive_ptr<c10d::Work> work, std::string what) : work_(std::move(work)), what_(std::move(what)) {}
  void wait() override {
    c10d_call(what_, [&] { work_->wait(); });
  }

 private:
  c10::intrusive_ptr<c10d::Work> work_;
  std::string what_;
};
}  // namespace

std::unique_ptr<World::Pending> World::start_all_reduce(at::Tensor &tensor) {
  std::vector<at::Tensor> one{tensor};
  c10::intrusive_ptr<c10d::Work> work;
  const std::string what = "all-reduce (" + impl_->where + ")";
  c10d_call(what, [&] { work = impl_->pg->allreduce(one); });
  return std::make_unique<GlooPending>(std::move(work), what);
}

void World::broadcast(const std::vector<at::Tensor> &tensors, int root) {
  c10d::BroadcastOptions bo;
  bo.rootRank = root;
  c10d_call("broadcast from rank " + std::to_string(root) + " (" + impl_->where + ")", [&] {
    for (const auto &t : tensors) {
      std::vector<at::Tensor> one{t};
      impl_->pg->broadcast(one, bo)->wait();
    }
  });
}

void World::barrier() {
  c10d_call("barrier (" + impl_->where + ")", [&] { impl_->pg->barrier()->wait(); });
}

}  // namespace tpt::dist
