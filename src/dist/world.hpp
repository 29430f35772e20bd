// A process's place in a distributed job (tensorpack's HorovodTrainer: one
// or more towers per process, gradients all-reduced across processes) and
// its collective engine, c10d: a TCPStore for the rendezvous (rank 0 serves
// it) and a ProcessGroupGloo on CPU. The rendezvous follows torchrun's
// environment contract (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE,
// LOCAL_RANK, LOCAL_WORLD_SIZE, ...), which tools/tptrain-run, torchrun and
// SLURM/Kubernetes wrappers set; explicit options win over it.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace at {
class Tensor;
}

namespace tpt::dist {

// What a process knows of the job. -1 / "": take it from the environment.
struct WorldOptions {
  std::string master_addr;
  int master_port = -1;
  int rank = -1;
  int world_size = -1;
  int local_rank = -1;
  std::chrono::milliseconds timeout{60000};  // rendezvous and every collective
};

struct Rendezvous {
  std::string master_addr;
  int master_port = 0;
  int rank = 0, world_size = 1;
  int local_rank = 0, local_world_size = 1;
  std::string run_id;  // TORCHELASTIC_RUN_ID, "" when not set
  std::chrono::milliseconds timeout{60000};
};

// The options completed from the environment (`getenv`, ::getenv by
// default) and checked; an error names the variable or option at fault.
Rendezvous rendezvous(const WorldOptions &options,
                      const std::function<const char *(const char *)> &getenv = nullptr);

// The job's process group. Collectives are blocking, sum in place, and fail
// (TPT_ERR_BACKEND, naming what timed out) after the timeout.
//
// Faults: every rank beats a heartbeat into the store (a thread of the
// World, twice a second or faster for short timeouts) with the number of
// collectives it started. When a collective fails (a peer's connection
// closed, or the timeout), the error names the ranks whose heartbeat
// stopped ("rank 2 is lost"), or that lag behind in collectives (a rank
// that is stuck), or rank 0 when its store cannot be reached. The first
// verdict is kept in the store, so every rank names the same one, and rank 0
// (whose process serves the store) waits for the live ranks to have read it,
// at most the timeout, before its error returns.
class World {
 public:
  explicit World(const Rendezvous &r);
  ~World();
  World(const World &) = delete;
  World &operator=(const World &) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }  // among the processes of its machine
  // One dense CPU tensor, summed over the ranks in place.
  void all_reduce(at::Tensor &tensor);
  // The same, started: wait() on the result finishes it (and throws its
  // error). Every rank must start its collectives in the same order.
  class Pending {
   public:
    virtual ~Pending() = default;
    virtual void wait() = 0;
  };
  std::unique_ptr<Pending> start_all_reduce(at::Tensor &tensor);
  // Each tensor gets root's value (one collective per tensor, in order).
  void broadcast(const std::vector<at::Tensor> &tensors, int root);
  void barrier();
  // For tests: stops this rank's heartbeat (as if its process hung).
  void stop_heartbeat_for_testing();

  struct Impl;  // world.cpp

 private:
  std::unique_ptr<Impl> impl_;
  int rank_ = 0, size_ = 1, local_rank_ = 0;
};

}  // namespace tpt::dist
