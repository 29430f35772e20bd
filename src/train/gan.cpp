// tensorpack's GAN trainers (examples/GAN/GAN.py): run_steps made of the
// model's train ops, on the simple or a multi-tower strategy.
#include <memory>
#include <string>
#include <utility>

#include "base/error.hpp"
#include "model/model.hpp"
#include "train/input.hpp"
#include "train/strategy.hpp"

namespace tpt::parallel {

void gan(Trainer &t, std::shared_ptr<model::Model> model, std::unique_ptr<input::Input> input, const GanOptions &o,
         const std::optional<TowersOptions> &towers, const std::optional<Distributed> &distributed) {
  if (t.phase() != Trainer::Phase::Idle) fail(TPT_ERR_STATE, "the trainer has already run");
  if (towers && towers->kind == Kind::Async)
    fail(TPT_ERR_UNSUPPORTED, "the GAN trainers run on the replicated or the parameter-server strategy, not the async "
                              "one (tensorpack's MultiGPUGANTrainer averages the costs over the towers)");
  if (o.g_op.empty() || o.d_op.empty() || o.g_op == o.d_op)
    invalid_argument("the GAN's train ops need two different names (g_op '" + o.g_op + "', d_op '" + o.d_op + "')");
  if (o.separate) {
    if (o.d_period < 1 || o.g_period < 1)
      invalid_argument("d_period and g_period must be at least 1 (they are " + std::to_string(o.d_period) + " and " +
                       std::to_string(o.g_period) + ")");
    if (o.d_period != 1 && o.g_period != 1)
      invalid_argument("one of d_period and g_period must be 1 (they are " + std::to_string(o.d_period) + " and " +
                       std::to_string(o.g_period) + "), as tensorpack's SeparateGANTrainer");
  }
  train(t, model, std::move(input), towers, distributed);
  // GANModelDesc's defaults: g_loss over "gen/", d_loss over "discrim/"
  // (added once the trainer took the model: a failure leaves it as it was;
  // the strategy resolves the ops when training starts).
  if (!model->train_op(o.g_op)) model->add_train_op({o.g_op, "g_loss", "gen/", nullptr});
  if (!model->train_op(o.d_op)) model->add_train_op({o.d_op, "d_loss", "discrim/", nullptr});
  auto *strategy = dynamic_cast<Strategy *>(t.stateful());
  if (!strategy) fail(TPT_ERR_INTERNAL, "the GAN trainer has no strategy");
  const std::string g = o.g_op, d = o.d_op;
  if (!o.separate) {
    // GANTrainer: train_op = d_min with a control dependency on g_min.
    t.set_run_step([strategy, g, d](Trainer &tr) { strategy->run_ops(tr, {g, d}, /*hooked=*/true); });
  } else {
    const int64_t dp = o.d_period, gp = o.g_period;
    t.set_run_step([strategy, g, d, dp, gp](Trainer &tr) {
      if (tr.global_step() % dp == 0) strategy->run_ops(tr, {d}, /*hooked=*/true);
      if (tr.global_step() % gp == 0) strategy->run_ops(tr, {g}, /*hooked=*/true);
    });
  }
}

}  // namespace tpt::parallel
