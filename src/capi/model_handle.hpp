// The model, tower and optimizer handles, shared by the C API files that
// take them (model, tower, layer, optimizer, callback, trainer, launch,
// inference).
#pragma once

#include <cstdint>
#include <memory>

#include "capi/handles.hpp"
#include "model/model.hpp"
#include "model/optimizer.hpp"

inline constexpr uint64_t kModelMagic = 0x7470744d6f64656cull;  // "tptModel"
inline constexpr uint64_t kTowerMagic = 0x74707454776572ull;    // "tptTwer"
inline constexpr uint64_t kOptimizerMagic = 0x747074496f707469ull;  // "tptIopti"

struct tpt_model {
  uint64_t magic = kModelMagic;
  std::shared_ptr<tpt::model::Model> model;
  bool lent = false;  // the library's handle, lent for a call: tpt_model_free leaves it alone
};
struct tpt_optimizer {
  uint64_t magic = kOptimizerMagic;
  std::shared_ptr<tpt::model::Optimizer> optimizer;
};

struct tpt_tower {
  uint64_t magic = kTowerMagic;
  tpt::model::Tower *tower;
};

namespace tpt::capi {

// The handle, or TPT_ERR_INVALID_ARGUMENT naming `name` when it is NULL or
// not a live `type`.
template <class H>
H &live(H *h, uint64_t magic, const char *name, const char *type) {
  require(h, name);
  if (__builtin_expect(h->magic != magic, 0)) throw_not_live(name, type);
  return *h;
}

inline tpt::model::Model &model_arg(const tpt_model *m) {
  return *live(const_cast<tpt_model *>(m), kModelMagic, "model", "tpt_model").model;
}

inline std::shared_ptr<tpt::model::Model> model_arg_ptr(const tpt_model *m, const char *name = "model") {
  return live(const_cast<tpt_model *>(m), kModelMagic, name, "tpt_model").model;
}

inline tpt::model::Tower &tower_arg(const tpt_tower *t) {
  return *live(const_cast<tpt_tower *>(t), kTowerMagic, "tower", "tpt_tower").tower;
}

inline tpt::model::Optimizer &optimizer_arg(const tpt_optimizer *o) {
  return *live(const_cast<tpt_optimizer *>(o), kOptimizerMagic, "optimizer", "tpt_optimizer").optimizer;
}

}  // namespace tpt::capi
