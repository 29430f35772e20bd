// What a tower function asks and does: its context, scopes, variables
// (include/tptrain/tower.h).
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

#include "capi/args.hpp"
#include "capi/model_handle.hpp"
#include "capi/trainer_handle.hpp"
#include "model/model.hpp"

using tpt::capi::copy_text;
using tpt::capi::guard;
using tpt::capi::name_arg;
using tpt::capi::require;
using tpt::capi::tensor_arg;
using tpt::capi::tower_arg;
using tpt::capi::variable_options_arg;

tpt_status *tpt_tower_is_training(int32_t *out, const tpt_tower *tower) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = tower_arg(tower).is_training();
  });
}

tpt_status *tpt_tower_is_building(int32_t *out, const tpt_tower *tower) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = tower_arg(tower).is_building();
  });
}

tpt_status *tpt_tower_index(int32_t *out, const tpt_tower *tower) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = tower_arg(tower).index();
  });
}

tpt_status *tpt_tower_name(char *buf, size_t size, const tpt_tower *tower) {
  return guard(__func__, [&] { copy_text(buf, size, nullptr, tower_arg(tower).name()); });
}

tpt_status *tpt_tower_device(char *buf, size_t size, const tpt_tower *tower) {
  return guard(__func__, [&] { copy_text(buf, size, nullptr, tower_arg(tower).device().str()); });
}

tpt_status *tpt_tower_can_create_variables(int32_t *out, const tpt_tower *tower) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = tower_arg(tower).can_create_variables();
  });
}

tpt_status *tpt_tower_set_cost(tpt_tower *tower, const tpt_tensor *cost) {
  return guard(__func__, [&] {
    tpt::model::Tower &t = tower_arg(tower);
    t.set_cost(tensor_arg(cost, "cost"));
  });
}

tpt_status *tpt_tower_set_output(tpt_tower *tower, const char *name, const tpt_tensor *value) {
  return guard(__func__, [&] {
    tpt::model::Tower &t = tower_arg(tower);
    std::string key = name_arg(name, "name");
    t.set_output(key, tensor_arg(value, "value"));
  });
}

tpt_status *tpt_tower_push_scope(tpt_tower *tower, const char *scope) {
  return guard(__func__, [&] {
    tpt::model::Tower &t = tower_arg(tower);
    t.push_scope(require(scope, "scope"));
  });
}

tpt_status *tpt_tower_push_reuse_scope(tpt_tower *tower, const char *scope) {
  return guard(__func__, [&] {
    tpt::model::Tower &t = tower_arg(tower);
    t.push_scope(require(scope, "scope"), /*reuse=*/true);
  });
}

tpt_status *tpt_tower_pop_scope(tpt_tower *tower) {
  return guard(__func__, [&] { tower_arg(tower).pop_scope(); });
}

tpt_status *tpt_tower_variable(tpt_tensor **out, tpt_tower *tower, const char *name, const int64_t *shape,
                               size_t ndim, const tpt_variable_options *options) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    tpt::model::Tower &t = tower_arg(tower);
    std::string key = name_arg(name, "name");
    if (ndim > 0) require(shape, "shape");
    tpt::model::VariableOptions vo = variable_options_arg(options, "options");
    tpt::capi::give(out, t.variable(key, c10::IntArrayRef(shape, ndim), vo));
  });
}
