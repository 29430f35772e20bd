// The distributed rendezvous (issue 15): torchrun's environment contract
// read and checked, and a World of two ranks (threads) that all-reduces,
// broadcasts and fails in time when a rank does not come.
#include <gtest/gtest.h>

#include <ATen/ops/full.h>
#include <ATen/ops/ones.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <map>
#include <string>
#include <cstdio>
#include <thread>
#include <vector>

#include "base/error.hpp"
#include "dist/world.hpp"
#include "free_port.hpp"

using tpt::dist::Rendezvous;
using tpt::dist::World;
using tpt::dist::WorldOptions;

namespace {

Rendezvous from(const std::map<std::string, std::string> &env, WorldOptions o = {}) {
  return tpt::dist::rendezvous(o, [&](const char *name) -> const char * {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

std::string error_of(const std::map<std::string, std::string> &env, WorldOptions o = {}) {
  try {
    from(env, o);
  } catch (const tpt::Error &e) {
    EXPECT_EQ(e.code(), TPT_ERR_INVALID_ARGUMENT);
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Rendezvous, ReadsTorchrunsVariables) {
  Rendezvous r = from({{"MASTER_ADDR", "10.0.0.7"}, {"MASTER_PORT", "29511"}, {"RANK", "5"}, {"WORLD_SIZE", "8"},
                       {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "4"}, {"TORCHELASTIC_RUN_ID", "job42"}});
  EXPECT_EQ(r.master_addr, "10.0.0.7");
  EXPECT_EQ(r.master_port, 29511);
  EXPECT_EQ(r.rank, 5);
  EXPECT_EQ(r.world_size, 8);
  EXPECT_EQ(r.local_rank, 1);
  EXPECT_EQ(r.local_world_size, 4);
  EXPECT_EQ(r.run_id, "job42");
}

TEST(Rendezvous, OptionsWinOverTheEnvironment) {
  WorldOptions o;
  o.master_addr = "127.0.0.1";
  o.master_port = 1234;
  o.rank = 0;
  o.world_size = 2;
  Rendezvous r = from({{"MASTER_ADDR", "10.0.0.7"}, {"MASTER_PORT", "29511"}, {"RANK", "5"}, {"WORLD_SIZE", "8"}}, o);
  EXPECT_EQ(r.master_addr, "127.0.0.1");
  EXPECT_EQ(r.master_port, 1234);
  EXPECT_EQ(r.rank, 0);
  EXPECT_EQ(r.world_size, 2);
  EXPECT_EQ(r.local_rank, 0);  // not given anywhere: 0 of 1
  EXPECT_EQ(r.local_world_size, 1);
  // an explicit local rank needs no LOCAL_WORLD_SIZE
  o.rank = 1;
  o.local_rank = 1;
  r = from({}, o);
  EXPECT_EQ(r.local_rank, 1);
  EXPECT_EQ(r.local_world_size, 2);
}

TEST(Rendezvous, NamesWhatIsMissingOrWrong) {
  const std::map<std::string, std::string> good = {
      {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}, {"RANK", "1"}, {"WORLD_SIZE", "2"}};
  EXPECT_EQ(error_of(good), "");
  auto without = [&](const std::string &name) {
    auto e = good;
    e.erase(name);
    return e;
  };
  auto with = [&](const std::string &name, const std::string &value) {
    auto e = good;
    e[name] = value;
    return e;
  };
  EXPECT_NE(error_of(without("MASTER_ADDR")).find("set MASTER_ADDR"), std::string::npos);
  EXPECT_NE(error_of(without("MASTER_PORT")).find("set MASTER_PORT"), std::string::npos);
  EXPECT_NE(error_of(without("RANK")).find("set RANK"), std::string::npos);
  EXPECT_NE(error_of(without("WORLD_SIZE")).find("set WORLD_SIZE"), std::string::npos);
  EXPECT_NE(error_of(with("RANK", "2")).find("RANK is \"2\": it must be a whole number from 0 to 1"), std::string::npos);
  EXPECT_NE(error_of(with("MASTER_PORT", "80x")).find("MASTER_PORT is \"80x\""), std::string::npos);
  EXPECT_NE(error_of(with("WORLD_SIZE", "0")).find("WORLD_SIZE is \"0\""), std::string::npos);
  // LOCAL_RANK without LOCAL_WORLD_SIZE: the missing variable is named.
  EXPECT_NE(error_of(with("LOCAL_RANK", "1")).find("LOCAL_RANK is 1 but LOCAL_WORLD_SIZE is not set"),
            std::string::npos)
      << error_of(with("LOCAL_RANK", "1"));
  {
    auto e = with("LOCAL_RANK", "1");
    e["LOCAL_WORLD_SIZE"] = "1";
    EXPECT_NE(error_of(e).find("LOCAL_RANK is \"1\": it must be a whole number from 0 to 0"), std::string::npos);
  }
  WorldOptions bad;
  bad.rank = 7;
  EXPECT_NE(error_of(good, bad).find("rank is 7: it must be from 0 to 1"), std::string::npos);
}

// A one-process job needs neither MASTER_ADDR nor MASTER_PORT: this machine,
// any free port (0); MASTER_PORT=0 asks for that too, and a job of several
// processes cannot use it (the others could not find the port).
TEST(Rendezvous, AOneProcessJobNeedsNoAddressOrPort) {
  Rendezvous r = from({{"RANK", "0"}, {"WORLD_SIZE", "1"}});
  EXPECT_EQ(r.master_addr, "127.0.0.1");
  EXPECT_EQ(r.master_port, 0);
  WorldOptions o;
  o.world_size = 1;
  o.rank = 0;
  EXPECT_EQ(from({}, o).master_port, 0);
  EXPECT_EQ(from({{"MASTER_PORT", "29555"}}, o).master_port, 29555);
  EXPECT_NE(error_of({{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "0"}, {"RANK", "0"}, {"WORLD_SIZE", "2"}})
                .find("the master port is 0 (any free port), which only a one-process job can use: the other 1 rank(s)"),
            std::string::npos);
  EXPECT_NE(error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "29555"}}).find("set MASTER_ADDR"),
            std::string::npos);
}

// Two one-process jobs at once, each on a free port of its own.
TEST(World, OneProcessJobsTakeAnyFreePort) {
  WorldOptions o;
  o.world_size = 1;
  o.rank = 0;
  o.timeout = std::chrono::milliseconds(20000);
  auto none = [](const char *) -> const char * { return nullptr; };
  World a(tpt::dist::rendezvous(o, none)), b(tpt::dist::rendezvous(o, none));
  at::Tensor t = at::full({2}, 3.0f);
  a.all_reduce(t);
  b.all_reduce(t);
  a.barrier();
  EXPECT_TRUE(t.equal(at::full({2}, 3.0f))) << t;
}

TEST(World, TwoRanksAllReduceAndBroadcast) {
  const int port = free_port();
  std::vector<at::Tensor> sums(2), casts(2);
  std::vector<std::string> errors(2);
  auto rank_main = [&](int rank) {
    try {
      WorldOptions o;
      o.master_addr = "127.0.0.1";
      o.master_port = port;
      o.rank = rank;
      o.world_size = 2;
      o.timeout = std::chrono::milliseconds(20000);
      World w(tpt::dist::rendezvous(o, [](const char *) -> const char * { return nullptr; }));
      at::Tensor t = at::full({3}, static_cast<float>(rank + 1));
      w.all_reduce(t);
      sums[static_cast<size_t>(rank)] = t;
      at::Tensor b = at::full({2}, static_cast<double>(10 * (rank + 1)), at::kDouble);
      w.broadcast({b}, 1);
      casts[static_cast<size_t>(rank)] = b;
      w.barrier();
    } catch (const std::exception &e) {
      errors[static_cast<size_t>(rank)] = e.what();
    }
  };
  std::thread other(rank_main, 1);
  rank_main(0);
  other.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
    EXPECT_TRUE(sums[static_cast<size_t>(r)].equal(at::full({3}, 3.0f))) << sums[static_cast<size_t>(r)];
    EXPECT_TRUE(casts[static_cast<size_t>(r)].equal(at::full({2}, 20.0, at::kDouble))) << casts[static_cast<size_t>(r)];
  }
}

TEST(World, ARankThatNeverComesFailsTheRendezvousInTime) {
  WorldOptions o;
  o.master_addr = "127.0.0.1";
  o.master_port = free_port();
  o.rank = 0;
  o.world_size = 2;
  o.timeout = std::chrono::milliseconds(1500);
  const auto start = std::chrono::steady_clock::now();
  try {
    World w(tpt::dist::rendezvous(o, [](const char *) -> const char * { return nullptr; }));
    FAIL() << "a world of 2 formed with one rank";
  } catch (const tpt::Error &e) {
    EXPECT_EQ(e.code(), TPT_ERR_BACKEND);
    EXPECT_NE(std::string(e.what()).find("the rendezvous at 127.0.0.1:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("(rank 0 of 2)"), std::string::npos) << e.what();
  }
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(took, 15.0);
}

// Every rank that waits for a missing peer gives up at the timeout, not at
// twice it (the store's wait and then the process group's): rank 1 whose
// rank 0 never comes, and ranks 0 and 1 of 3 whose rank 2 never comes; the
// error names the ranks that did not join where the store can tell.
TEST(World, ARankWaitingForAMissingPeerGivesUpAtTheTimeout) {
  using Clock = std::chrono::steady_clock;
  const auto timeout = std::chrono::milliseconds(3000);
  auto join = [&](int rank, int world, int port, std::string *error, double *took) {
    WorldOptions o;
    o.master_addr = "127.0.0.1";
    o.master_port = port;
    o.rank = rank;
    o.world_size = world;
    o.timeout = timeout;
    const auto start = Clock::now();
    try {
      World w(tpt::dist::rendezvous(o, [](const char *) -> const char * { return nullptr; }));
      *error = "";
    } catch (const std::exception &e) {
      *error = e.what();
    }
    *took = std::chrono::duration<double>(Clock::now() - start).count();
  };
  const double limit = 1.5 * std::chrono::duration<double>(timeout).count();
  {
    std::string error;
    double took = 0;
    join(1, 2, free_port(), &error, &took);
    EXPECT_NE(error.find("(rank 1 of 2)"), std::string::npos) << error;
    EXPECT_LT(took, limit) << "rank 1 without rank 0 gave up after " << took << " s: " << error;
    std::printf("# rank 1 of 2 without rank 0: gave up after %.2f s (timeout 3 s)\n", took);
  }
  {
    const int port = free_port();
    std::string errors[2];
    double took[2] = {0, 0};
    std::thread one(join, 1, 3, port, &errors[1], &took[1]);
    join(0, 3, port, &errors[0], &took[0]);
    one.join();
    for (int r = 0; r < 2; ++r) {
      EXPECT_NE(errors[r], "") << "rank " << r << " formed a world of 3 without rank 2";
      EXPECT_LT(took[r], limit) << "rank " << r << " of 3 without rank 2 gave up after " << took[r] << " s: " << errors[r];
      std::printf("# rank %d of 3 without rank 2: gave up after %.2f s: %s\n", r, took[r], errors[r].c_str());
    }
  }
}

// A rank whose heartbeat stops and that never joins the collective: the
// others fail within the timeout, and both name it.
TEST(World, ACollectiveWithALostRankNamesIt) {
  const int port = free_port();
  std::vector<std::string> errors(3);
  std::vector<double> took(3, 0);
  std::mutex mu;
  std::condition_variable cv;
  int done = 0;
  auto rank_main = [&](int rank) {
    try {
      WorldOptions o;
      o.master_addr = "127.0.0.1";
      o.master_port = port;
      o.rank = rank;
      o.world_size = 3;
      o.timeout = std::chrono::milliseconds(2000);
      World w(tpt::dist::rendezvous(o, [](const char *) -> const char * { return nullptr; }));
      at::Tensor t = at::ones({4});
      w.all_reduce(t);  // all three
      if (rank == 2) {  // hangs: no heartbeat, no collective, until the others are done
        w.stop_heartbeat_for_testing();
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return done == 2; });
        return;
      }
      const auto start = std::chrono::steady_clock::now();
      try {
        w.all_reduce(t);
      } catch (const std::exception &e) {
        errors[static_cast<size_t>(rank)] = e.what();
      }
      took[static_cast<size_t>(rank)] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    } catch (const std::exception &e) {
      errors[static_cast<size_t>(rank)] = std::string("setup: ") + e.what();
    }
    std::lock_guard<std::mutex> lock(mu);
    ++done;
    cv.notify_all();
  };
  std::thread r1(rank_main, 1), r2(rank_main, 2);
  rank_main(0);
  r1.join();
  r2.join();
  for (int r = 0; r < 2; ++r) {
    const std::string &e = errors[static_cast<size_t>(r)];
    EXPECT_NE(e.find("all-reduce (rank " + std::to_string(r) + " of 3)"), std::string::npos) << e;
    EXPECT_NE(e.find("rank 2 is lost"), std::string::npos) << e;
    EXPECT_LT(took[static_cast<size_t>(r)], 12.0) << e;
  }
  EXPECT_EQ(errors[2], "");
}
