// The replicated strategy's BatchNorm rule (issue 14): the moving statistics
// follow tower 0's batches only, and after every epoch every replica holds
// tower 0's. Reads the replicas through MultiTower::variables_of.
#include <gtest/gtest.h>

#include <ATen/TensorOperators.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/zeros.h>

#include <memory>
#include <mutex>
#include <vector>

#include "core/trainer.hpp"
#include "input/input.hpp"
#include "model/layers.hpp"
#include "model/model.hpp"
#include "model/optimizer.hpp"
#include "parallel/towers.hpp"

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

TEST(Towers, ReplicatedBatchNormFollowsTowerZero) {
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
