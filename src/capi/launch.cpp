// TrainConfig and launch (include/tptrain/launch.h).
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

#include "capi/trainer_handle.hpp"

tpt_status *tpt_launch_train(const tpt_train_config *config) {
  tpt_trainer *trainer = nullptr;
  tpt_status *st = tpt_trainer_from_config(&trainer, config);
  if (st) return st;
  trainer->library_owned = true;  // a callback's tpt_trainer_free of it is a no-op
  st = tpt_trainer_run(trainer);
  trainer->library_owned = false;
  tpt_trainer_free(trainer);
  return st;
}
