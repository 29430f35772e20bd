// The dataflow and input handles, shared by the C API files of the dataflow
// and input modules (dataflow.cpp, input.cpp) and of the places that take an
// input or a dataflow: tpt_trainer_set_model, tpt_trainer_set_towers and the
// train config (trainer.cpp, launch.cpp), the inference runner.
#pragma once

#include <cstdint>
#include <memory>

#include "capi/handles.hpp"
#include "data/dataflow.hpp"
#include "train/input.hpp"

inline constexpr uint64_t kDataflowMagic = 0x7470744461746166ull;  // "tptDataf"
inline constexpr uint64_t kInputMagic = 0x747074496e707574ull;     // "tptInput"

struct tpt_dataflow {
  uint64_t magic = kDataflowMagic;
  std::shared_ptr<tpt::data::DataFlow> df;
};
struct tpt_input {
  uint64_t magic = kInputMagic;
  std::unique_ptr<tpt::input::Input> input;
};

namespace tpt::capi {

// The dataflow, or TPT_ERR_INVALID_ARGUMENT naming `name` when the handle is
// NULL or not a live tpt_dataflow.
inline tpt::data::DataFlowPtr dataflow_arg(const tpt_dataflow *d, const char *name = "df") {
  require(d, name);
  if (__builtin_expect(d->magic != kDataflowMagic, 0)) throw_not_live(name, "tpt_dataflow");
  return d->df;
}

// An input handle's content, taken whatever happens next (the handle is
// freed); nullptr for a NULL or dead handle, which check_taken reports.
inline std::unique_ptr<tpt::input::Input> take_input(tpt_input *input) {
  std::unique_ptr<tpt::input::Input> in;
  if (input && input->magic == kInputMagic) {
    in = std::move(input->input);
    input->magic = 0;
    delete input;
  }
  return in;
}
inline void check_taken(const std::unique_ptr<tpt::input::Input> &in, const tpt_input *input,
                        const char *name = "input") {
  if (in) return;
  require(input, name);
  throw_not_live(name, "tpt_input");
}

// The input of dataflow `d` that `options` describe (NULL: the defaults, a
// queue of 50 batches that repeats); `name` names the options in errors
// (tpt_input_from_dataflow, the train config).
inline std::unique_ptr<tpt::input::Input> input_of(tpt::data::DataFlowPtr d, const tpt_input_options *options,
                                                   const std::string &name) {
  tpt_input_options o = TPT_INPUT_OPTIONS_INIT;
  if (options) {
    if (options->version < 1 || options->version > TPT_INPUT_OPTIONS_VERSION)
      tpt::invalid_argument(name + "->version is " + std::to_string(options->version) +
                            " (initialise with TPT_INPUT_OPTIONS_INIT)");
    o = *options;
  }
  if (tpt::enum_int(o.kind) != TPT_INPUT_QUEUE && tpt::enum_int(o.kind) != TPT_INPUT_FEED)
    tpt::invalid_argument(name + "->kind " + std::to_string(tpt::enum_int(o.kind)) + " is not a tpt_input_kind");
  if (o.kind == TPT_INPUT_QUEUE && o.capacity < 1)
    tpt::invalid_argument(name + "->capacity must be >= 1, got " + std::to_string(o.capacity) + " (batches)");
  if (o.kind == TPT_INPUT_QUEUE) return tpt::input::queue(std::move(d), o.capacity, o.repeat != 0);
  return tpt::input::feed(std::move(d), o.repeat != 0);
}

}  // namespace tpt::capi
