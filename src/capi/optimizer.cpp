// Optimizers and their hyper-parameters (include/tptrain/optimizer.h).
#include <ATen/Context.h>
#include <ATen/core/Tensor.h>
#include <c10/core/GradMode.h>
#include <c10/util/SmallVector.h>

#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "capi/model_handle.hpp"
#include "capi/trainer_handle.hpp"
#include "model/model.hpp"
#include "model/optimizer.hpp"

using tpt::capi::guard;
using tpt::capi::name_arg;
using tpt::capi::optimizer_arg;
using tpt::capi::require;

tpt_status *tpt_optimizer_new(tpt_optimizer **out, const char *kind) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    auto opt = std::make_shared<tpt::model::Optimizer>(require(kind, "kind"));
    auto *h = new tpt_optimizer;
    h->optimizer = std::move(opt);
    *out = h;
  });
}

void tpt_optimizer_free(tpt_optimizer *optimizer) {
  if (optimizer == nullptr || optimizer->magic != kOptimizerMagic) return;
  optimizer->magic = 0;
  delete optimizer;
}

tpt_status *tpt_optimizer_set(tpt_optimizer *optimizer, const char *name, double value) {
  return guard(__func__, [&] {
    tpt::model::Optimizer &o = optimizer_arg(optimizer);
    o.set(name_arg(name, "name"), value);
  });
}

tpt_status *tpt_optimizer_get(double *out, const tpt_optimizer *optimizer, const char *name) {
  return guard(__func__, [&] {
    require(out, "out");
    const tpt::model::Optimizer &o = optimizer_arg(optimizer);
    *out = o.get(name_arg(name, "name"));
  });
}

tpt_status *tpt_optimizer_scale_gradients(tpt_optimizer *optimizer, const char *pattern, double factor) {
  return guard(__func__, [&] {
    tpt::model::Optimizer &o = optimizer_arg(optimizer);
    o.scale_gradients(require(pattern, "pattern"), factor);
  });
}
