// The replicated strategy's BatchNorm rule (issue 14): the moving statistics
// follow tower 0's batches only, and after every epoch every replica holds
// tower 0's. Reads the replicas through MultiTower::variables_of.
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>

#include <ATen/TensorOperators.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/zeros.h>
#include <torch/csrc/autograd/autograd.h>

#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "loop/trainer.hpp"
#include "train/input.hpp"
#include "model/layers.hpp"
#include "model/model.hpp"
#include "model/optimizer.hpp"
#include "train/towers.hpp"

#include "tensor_close.hpp"

namespace L = tpt::model::layers;
using tpt::model::Model;
using tpt::model::Tower;

namespace {

// After each epoch: every replica's non-trainable variables equal tower 0's.
class ReplicasAgree final : public tpt::Callback {
 public:
  explicit ReplicasAgree(std::shared_ptr<tpt::parallel::MultiTower> s) : Callback("ReplicasAgree", false), s_(s) {}
  uint32_t events() const override { return TPT_EVENT_TRIGGER_EPOCH; }
  void on_event(tpt::Trainer &, tpt_event, const tpt::Record *) override {
    const auto &main = s_->variables_of(0);
    for (int k = 1; k < s_->towers(); ++k) {
      const auto &mine = s_->variables_of(k);
      ASSERT_EQ(mine.size(), main.size());
      for (size_t i = 0; i < main.size(); ++i) {
        EXPECT_EQ(mine[i].name, main[i].name);
        EXPECT_TRUE(mine[i].value.equal(main[i].value)) << "tower " << k << ": " << main[i].name;
        EXPECT_NE(mine[i].value.data_ptr(), main[i].value.data_ptr()) << "a replica shares tower 0's storage";
      }
    }
    ++epochs;
  }
  int epochs = 0;

 private:
  std::shared_ptr<tpt::parallel::MultiTower> s_;
};

}  // namespace

namespace {

void batch_norm_follows_tower_zero(bool mirror) {
  at::manual_seed(5);
  std::mutex mu;
  std::vector<at::Tensor> tower0_means;  // the batch mean of BatchNorm's input in tower 0's training calls
  std::vector<int> calls(2, 0);
  tpt::model::InputSpec xs{"x", at::kFloat, {-1, 4}}, ys{"y", at::kFloat, {-1, 1}};
  auto model = std::make_shared<Model>(std::vector<tpt::model::InputSpec>{xs, ys}, [&](Tower &t,
                                                                                    const std::vector<at::Tensor> &in) {
    at::Tensor pre = L::fc(t, "fc1", in[0], 3, L::LayerOptions());
    if (t.is_training() && !t.is_building()) {
      std::lock_guard<std::mutex> l(mu);
      ++calls[static_cast<size_t>(t.index())];
      if (t.index() == 0) tower0_means.push_back(pre.detach().mean(0));
    }
    at::Tensor h = L::batch_norm(t, "bn", pre);
    t.set_cost(L::mse(L::fc(t, "out", h, 1, L::LayerOptions()), in[1]));
  });
  auto opt = std::make_shared<tpt::model::Optimizer>("sgd");
  opt->set("learning_rate", 0.05);
  model->set_optimizer(opt);
  // 8 batches of 6 rows per pass, the odd ones 10x larger: tower 1's batches
  // would move the statistics far if they counted.
  at::Tensor x = at::randn({48, 4});
  for (int b = 1; b < 8; b += 2) x.slice(0, b * 6, b * 6 + 6).mul_(10);
  at::Tensor y = at::randn({48, 1});
  auto input = tpt::input::from_tensors({x, y}, 6, /*shuffle=*/false, 0);
  input->set_signature(model->inputs());

  tpt::TrainerConfig cfg;
  cfg.max_epoch = 3;
  cfg.steps_per_epoch = 4;
  cfg.console = false;
  cfg.progress = TPT_PROGRESS_OFF;
  cfg.default_callbacks = false;
  tpt::Trainer trainer(cfg);
  tpt::parallel::TowersOptions o;
  o.kind = tpt::parallel::Kind::Replicated;
  o.devices = {c10::Device(c10::kCPU), c10::Device(c10::kCPU)};
  o.mirror_cpu_towers = mirror;
  auto strategy =
      std::dynamic_pointer_cast<tpt::parallel::MultiTower>(tpt::parallel::make_strategy(model, std::move(input), o));
  ASSERT_TRUE(strategy);
  tpt::parallel::attach(trainer, strategy);
  auto check = std::make_unique<ReplicasAgree>(strategy);
  ReplicasAgree *agree = check.get();
  trainer.add(std::move(check), tpt::Group::User);
  trainer.run();

  EXPECT_EQ(agree->epochs, 3);
  EXPECT_EQ(calls[0], 12);
  EXPECT_EQ(calls[1], 12);
  // tensorpack's momentum 0.9 is PyTorch's 0.1: ema = 0.9 ema + 0.1 mean,
  // over tower 0's calls only, from 0.
  at::Tensor want = at::zeros({3});
  for (const auto &m : tower0_means) want = want * 0.9 + m * 0.1;
  at::Tensor got = model->variables().find("bn/mean/EMA")->value;
  EXPECT_TRUE(at::allclose(got, want, 1e-5, 1e-6)) << got << "\nwant\n" << want;
}

}  // namespace

TEST(Towers, ReplicatedBatchNormFollowsTowerZero) { batch_norm_follows_tower_zero(false); }

// Towers on another device than their variables (CUDA towers) compute on
// mirrors refreshed every step, and tower 0's statistics are copied back:
// the same rule, run here with CPU towers forced through that path.
TEST(Towers, MirroredTowersBatchNormFollowsTowerZero) { batch_norm_follows_tower_zero(true); }

// The flat buckets (issue 14, item 3): filled in reverse order of the
// variables up to bucket_bytes, reduced inside the backward passes when
// overlap is on and after them when it is off, with the same result bit for
// bit; and the result is the 2-tower average that a hand-written LibTorch
// loop computes.
namespace {

struct BucketRun {
  std::vector<std::vector<size_t>> buckets;
  int64_t in_backward = 0;
  std::vector<at::Tensor> values;
};

BucketRun run_buckets(bool overlap, int64_t bucket_bytes, tpt::parallel::Kind kind, bool mirror = false) {
  at::manual_seed(9);
  tpt::model::InputSpec xs{"x", at::kFloat, {-1, 4}}, ys{"y", at::kFloat, {-1, 1}};
  auto model = std::make_shared<Model>(std::vector<tpt::model::InputSpec>{xs, ys},
                                       [](Tower &t, const std::vector<at::Tensor> &in) {
                                         at::Tensor h = L::fc(t, "fc1", in[0], 3, L::LayerOptions());
                                         t.set_cost(L::mse(L::fc(t, "out", h.tanh(), 1, L::LayerOptions()), in[1]));
                                       });
  auto opt = std::make_shared<tpt::model::Optimizer>("sgd");
  opt->set("learning_rate", 0.1);
  model->set_optimizer(opt);
  at::Tensor x = at::randn({16, 4}), y = at::randn({16, 1});
  auto input = tpt::input::from_tensors({x, y}, 4, /*shuffle=*/false, 0);
  input->set_signature(model->inputs());
  tpt::TrainerConfig cfg;
  cfg.max_epoch = 1;
  cfg.steps_per_epoch = 6;
  cfg.console = false;
  cfg.progress = TPT_PROGRESS_OFF;
  cfg.default_callbacks = false;
  tpt::Trainer trainer(cfg);
  tpt::parallel::TowersOptions o;
  o.kind = kind;
  o.devices = {c10::Device(c10::kCPU), c10::Device(c10::kCPU)};
  o.overlap = overlap;
  o.bucket_bytes = bucket_bytes;
  o.mirror_cpu_towers = mirror;
  auto strategy =
      std::dynamic_pointer_cast<tpt::parallel::MultiTower>(tpt::parallel::make_strategy(model, std::move(input), o));
  tpt::parallel::attach(trainer, strategy);
  trainer.run();
  BucketRun r;
  r.buckets = strategy->buckets();
  r.in_backward = strategy->reduced_in_backward();
  for (const auto &v : model->variables().all()) r.values.push_back(v.value.detach().clone());
  return r;
}

// The same 6 steps by hand: the two towers' gradients (autograd::grad on
// batches 2s and 2s+1) averaged, then SGD.
std::vector<at::Tensor> by_hand() {
  at::manual_seed(9);
  // The initial values as the model makes them: build once and copy.
  tpt::model::InputSpec xs{"x", at::kFloat, {-1, 4}}, ys{"y", at::kFloat, {-1, 1}};
  auto model = std::make_shared<Model>(std::vector<tpt::model::InputSpec>{xs, ys},
                                       [](Tower &t, const std::vector<at::Tensor> &in) {
                                         at::Tensor h = L::fc(t, "fc1", in[0], 3, L::LayerOptions());
                                         t.set_cost(L::mse(L::fc(t, "out", h.tanh(), 1, L::LayerOptions()), in[1]));
                                       });
  at::Tensor x = at::randn({16, 4}), y = at::randn({16, 1});  // drawn before the build, as in run_buckets
  model->build();
  std::vector<at::Tensor> p;  // fc1/W, fc1/b, out/W, out/b
  for (const auto &v : model->variables().all()) p.push_back(v.value.detach().clone().requires_grad_(true));
  for (int step = 0; step < 6; ++step) {
    std::vector<at::Tensor> sum;
    for (int k = 0; k < 2; ++k) {
      int b = (2 * step + k) % 4;
      at::Tensor xb = x.slice(0, b * 4, b * 4 + 4), yb = y.slice(0, b * 4, b * 4 + 4);
      at::Tensor out = (xb.mm(p[0].t()) + p[1]).tanh().mm(p[2].t()) + p[3];
      at::Tensor cost = (out - yb).pow(2).mean();
      auto g = torch::autograd::grad({cost}, p);
      if (sum.empty()) sum = g;
      else
        for (size_t i = 0; i < g.size(); ++i) sum[i] = sum[i] + g[i];
    }
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < p.size(); ++i) p[i].sub_(sum[i] * 0.5 * 0.1);
  }
  return p;
}

}  // namespace

TEST(Towers, BucketsOverlapBackwardWithTheSameResult) {
  for (auto kind : {tpt::parallel::Kind::Replicated, tpt::parallel::Kind::ParameterServer}) {
    // fc1/W 48 bytes, fc1/b 12, out/W 12, out/b 4: buckets of 16 bytes
    // hold {out/b, out/W}, {fc1/b}, {fc1/W}.
    BucketRun small = run_buckets(true, 16, kind);
    ASSERT_EQ(small.buckets, (std::vector<std::vector<size_t>>{{3, 2}, {1}, {0}}));
    EXPECT_EQ(small.in_backward, 3 * 6);  // every bucket, every step, inside a backward pass
    BucketRun one = run_buckets(true, 1 << 20, kind);
    ASSERT_EQ(one.buckets, (std::vector<std::vector<size_t>>{{3, 2, 1, 0}}));
    EXPECT_EQ(one.in_backward, 6);
    BucketRun off = run_buckets(false, 16, kind);
    EXPECT_EQ(off.in_backward, 0);
    std::vector<at::Tensor> want = by_hand();
    ASSERT_EQ(small.values.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_TRUE(small.values[i].equal(one.values[i])) << i;
      EXPECT_TRUE(small.values[i].equal(off.values[i])) << i;
      EXPECT_TRUE(at::allclose(small.values[i], want[i].detach(), 1e-5, 1e-6))
          << i << ": " << small.values[i] << "\nby hand\n" << want[i];
    }
  }
}

// The device path (each tower on a mirror of the variables, gradients handed
// back to the variables' device) gives the same numbers as CPU towers that
// compute on the variables themselves, for every strategy.
TEST(Towers, MirroredTowersGiveTheSameNumbers) {
  for (auto kind : {tpt::parallel::Kind::Replicated, tpt::parallel::Kind::ParameterServer,
                    tpt::parallel::Kind::Async}) {
    BucketRun direct = run_buckets(true, 16, kind), mirrored = run_buckets(true, 16, kind, /*mirror=*/true);
    ASSERT_EQ(direct.values.size(), mirrored.values.size());
    for (size_t i = 0; i < direct.values.size(); ++i)
      EXPECT_TRUE(direct.values[i].equal(mirrored.values[i])) << "strategy " << static_cast<int>(kind) << ", " << i;
  }
}

#ifdef TPT_HAVE_GLOO
// Towers across processes (issue 15): two ranks (threads here, each with its
// own model, trainer and World over TCP) of one tower each train exactly as
// one process with two replicated towers fed the same batches; rank 1
// starts from other initial values, which rank 0's broadcast replaces. Not
// in the ThreadSanitizer run (named Distributed, not Towers): Gloo is not
// instrumented.

#include <thread>

#include "dist/world.hpp"
#include "free_port.hpp"

namespace {

std::shared_ptr<Model> small_model() {
  tpt::model::InputSpec xs{"x", at::kFloat, {-1, 4}}, ys{"y", at::kFloat, {-1, 1}};
  auto model = std::make_shared<Model>(std::vector<tpt::model::InputSpec>{xs, ys},
                                       [](Tower &t, const std::vector<at::Tensor> &in) {
                                         at::Tensor h = L::fc(t, "fc1", in[0], 3, L::LayerOptions());
                                         t.set_cost(L::mse(L::fc(t, "out", h.tanh(), 1, L::LayerOptions()), in[1]));
                                       });
  auto opt = std::make_shared<tpt::model::Optimizer>("sgd");
  opt->set("learning_rate", 0.1);
  opt->set("momentum", 0.9);
  model->set_optimizer(opt);
  model->build();
  return model;
}

void train(std::shared_ptr<Model> model, std::unique_ptr<tpt::input::Input> input, tpt::parallel::TowersOptions o) {
  input->set_signature(model->inputs());
  tpt::TrainerConfig cfg;
  cfg.max_epoch = 2;
  cfg.steps_per_epoch = 3;
  cfg.console = false;
  cfg.progress = TPT_PROGRESS_OFF;
  cfg.default_callbacks = false;
  tpt::Trainer trainer(cfg);
  tpt::parallel::attach(trainer, tpt::parallel::make_strategy(model, std::move(input), std::move(o)));
  trainer.run();
}

}  // namespace

TEST(Distributed, TwoProcessesTrainAsTwoTowers) {
  for (bool overlap : {true, false}) {
    at::manual_seed(9);
    at::Tensor x = at::randn({16, 4}), y = at::randn({16, 1});
    at::manual_seed(21);
    auto reference = small_model();
    at::manual_seed(21);
    auto rank0 = small_model();  // the reference's initial values
    at::manual_seed(22);
    auto rank1 = small_model();  // other initial values
    ASSERT_FALSE(rank0->variables().all()[0].value.equal(rank1->variables().all()[0].value));

    tpt::parallel::TowersOptions two;
    two.kind = tpt::parallel::Kind::Replicated;
    two.devices = {c10::Device(c10::kCPU), c10::Device(c10::kCPU)};
    two.overlap = overlap;
    two.bucket_bytes = 16;
    train(reference, tpt::input::from_tensors({x, y}, 4, /*shuffle=*/false, 0), two);

    // Rank r takes batches r and r + 2 of the 4, as tower r does above.
    const int port = free_port();
    std::vector<std::string> errors(2);
    auto rank_main = [&](int rank) {
      try {
        tpt::dist::WorldOptions wo;
        wo.master_addr = "127.0.0.1";
        wo.master_port = port;
        wo.rank = rank;
        wo.world_size = 2;
        auto world = std::make_shared<tpt::dist::World>(
            tpt::dist::rendezvous(wo, [](const char *) -> const char * { return nullptr; }));
        std::vector<at::Tensor> rows;
        for (int b : {rank, rank + 2}) rows.push_back(at::arange(b * 4, b * 4 + 4));
        at::Tensor idx = at::cat(rows);
        tpt::parallel::TowersOptions one;
        one.kind = tpt::parallel::Kind::Replicated;
        one.devices = {c10::Device(c10::kCPU)};
        one.overlap = overlap;
        one.bucket_bytes = 16;
        one.world = world;
        train(rank == 0 ? rank0 : rank1,
              tpt::input::from_tensors({x.index_select(0, idx), y.index_select(0, idx)}, 4, false, 0), one);
      } catch (const std::exception &e) {
        errors[static_cast<size_t>(rank)] = e.what();
      }
    };
    std::thread other(rank_main, 1);
    rank_main(0);
    other.join();
    ASSERT_EQ(errors[0], "");
    ASSERT_EQ(errors[1], "");
    const auto want = reference->variables().all();
    const auto got0 = rank0->variables().all(), got1 = rank1->variables().all();
    ASSERT_EQ(got0.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_TRUE(got0[i].value.equal(want[i].value))
          << "overlap " << overlap << ", rank 0, " << want[i].name << ": max difference "
          << (got0[i].value - want[i].value).abs().max().item<double>() << " of "
          << want[i].value.abs().max().item<double>();
      EXPECT_TRUE(got1[i].value.equal(got0[i].value)) << "overlap " << overlap << ", rank 1, " << want[i].name;
    }
  }
}
#endif

namespace {

const c10::Device kCpu(c10::kCPU);
using tpt_test::close;

}  // namespace

// ---------------------------------------------------------------- towers on threads

// A tower function may run on several threads at once (tptrain's multi-tower
// trainers will call it so): four training towers, one thread each, through
// fc, batch norm and fc with backward into the shared variables. Their
// gradients add up to the sum of the towers' gradients computed one by one,
// and batch norm's moving averages move once (tower 0's call), as one by one.
// Also run under ThreadSanitizer (gtest-threads, test_cpp_threads).
TEST(Towers, TrainingTowersOnThreadsAtOnce) {
  at::manual_seed(11);
  tpt::model::InputSpec xs{"x", at::kFloat, {-1, 4}}, ys{"y", at::kFloat, {-1, 1}};
  Model model({xs, ys}, [](Tower &t, const std::vector<at::Tensor> &in) {
    L::LayerOptions relu;
    relu.activation = TPT_ACT_RELU;
    at::Tensor h = L::batch_norm(t, "bn", L::fc(t, "fc1", in[0], 8, relu));
    t.set_cost(L::mse(L::fc(t, "out", h, 1, L::LayerOptions()), in[1]));
  });
  model.build();
  constexpr int kTowers = 4;
  std::vector<std::vector<at::Tensor>> batches;
  for (int k = 0; k < kTowers; ++k) batches.push_back({at::randn({6, 4}) * (k + 1), at::randn({6, 1})});
  const auto vars = model.variables().all();
  auto ema = [&] { return std::make_pair(model.variables().find("bn/mean/EMA")->value.clone(),
                                         model.variables().find("bn/variance/EMA")->value.clone()); };
  auto [mean0, var0] = ema();
  auto run_tower = [&](int k) {
    Tower t(model, "tower" + std::to_string(k), k, /*training=*/true, /*building=*/false, kCpu);
    model.call(t, batches[k]);
    t.cost()->backward();
  };
  auto zero_grads = [&] {
    for (const auto &v : vars)
      if (v.trainable && v.value.grad().defined()) v.value.mutable_grad() = at::Tensor();
  };

  // One by one: the sum of the towers' gradients, and the averages after all.
  zero_grads();
  for (int k = 0; k < kTowers; ++k) run_tower(k);
  std::vector<at::Tensor> want;
  for (const auto &v : vars) want.push_back(v.trainable ? v.value.grad().clone() : at::Tensor());
  auto [mean1, var1] = ema();
  EXPECT_FALSE(mean1.equal(mean0));  // tower 0 moved them

  // The same on four threads at once, from the same variables.
  zero_grads();
  model.assign("bn/mean/EMA", mean0);
  model.assign("bn/variance/EMA", var0);
  std::vector<std::thread> threads;
  std::vector<std::string> errors(kTowers);
  for (int k = 0; k < kTowers; ++k)
    threads.emplace_back([&, k] {
      try {
        run_tower(k);
      } catch (const std::exception &e) {
        errors[k] = e.what();
      }
    });
  for (auto &th : threads) th.join();
  for (int k = 0; k < kTowers; ++k) EXPECT_EQ(errors[k], "") << "tower " << k;
  for (size_t i = 0; i < vars.size(); ++i) {
    if (!vars[i].trainable) continue;
    ASSERT_TRUE(vars[i].value.grad().defined()) << vars[i].name;
    EXPECT_TRUE(close(vars[i].value.grad(), want[i], 1e-5, 1e-6)) << vars[i].name;
  }
  auto [mean2, var2] = ema();
  EXPECT_TRUE(mean2.equal(mean1));
  EXPECT_TRUE(var2.equal(var1));
  zero_grads();
}
