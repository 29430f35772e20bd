// Dataflows and datapoints (include/tptrain/dataflow.h).
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "capi/data_handle.hpp"
#include "capi/model_handle.hpp"
#include "capi/trainer_handle.hpp"
#include "data/dataflow.hpp"
#include "model/dtype.hpp"

using tpt::capi::dataflow_arg;
using tpt::capi::guard;
using tpt::capi::live;
using tpt::capi::raise_status;
using tpt::capi::require;
using tpt::capi::tensor_arg;
using tpt::capi::UserData;
using tpt::data::DataFlowPtr;
using tpt::data::Datapoint;

inline constexpr uint64_t kDatapointMagic = 0x74707444706f6e74ull;  // "tptDpont"

struct tpt_datapoint {
  uint64_t magic = kDatapointMagic;
  tpt::data::Datapoint dp;
  bool lent = false;  // lent to a callback for one call: tpt_datapoint_free ignores it
  bool has_seed = false;  // lent to a map function: tpt_datapoint_seed's
  uint64_t seed = 0;
};

namespace {

DataFlowPtr df_arg(const tpt_dataflow *d, const char *name = "df") { return tpt::capi::dataflow_arg(d, name); }

tpt_datapoint &dp_arg(const tpt_datapoint *d, const char *name = "dp") {
  return live(const_cast<tpt_datapoint *>(d), kDatapointMagic, name, "tpt_datapoint");
}

// The dataflows that a C API call iterates on this thread, innermost last:
// tpt_dataflow_next on a dataflow from inside its own callbacks would recurse
// without end (or into a pass half-made), so it is refused.
thread_local std::vector<const tpt::data::DataFlow *> t_iterating;

struct Iterating {
  explicit Iterating(const tpt::data::DataFlow *df, const char *what) {
    for (const tpt::data::DataFlow *d : t_iterating)
      if (d == df)
        tpt::fail(TPT_ERR_STATE, std::string(what) + " was called on a dataflow from inside its own callbacks (a source's "
                                 "next, a map, a reset); a dataflow is not re-entrant");
    t_iterating.push_back(df);
  }
  ~Iterating() { t_iterating.pop_back(); }
  Iterating(const Iterating &) = delete;
  Iterating &operator=(const Iterating &) = delete;
};

// The dataflow iterated (or whose state is taken) from C: not one that a
// combinator or input reads, whose thread may be iterating it. The caller
// holds the reference for the whole call, so a callback of the dataflow that
// frees its handle (tpt_dataflow_free from inside next) cannot destroy it
// under the running call: it goes when the call returns.
DataFlowPtr own_df_arg(const tpt_dataflow *d, const char *instead = "iterate that one") {
  DataFlowPtr df = df_arg(d);
  if (df->claimed())
    tpt::invalid_argument("this " + df->kind() + " is read by another dataflow or an input; " + instead +
                          " (a dataflow has one consumer)");
  return df;
}

void give(tpt_dataflow **out, DataFlowPtr df) {
  auto *h = new tpt_dataflow;
  h->df = std::move(df);
  *out = h;
}

// Lends `dp` to host code as a tpt_datapoint for one call.
template <class F>
tpt_status *with_datapoint(Datapoint &dp, F &&call, const uint64_t *seed = nullptr) {
  tpt_datapoint h;
  h.lent = true;
  if (seed) h.has_seed = true, h.seed = *seed;
  h.dp = std::move(dp);
  // Dataflow callbacks are not scoped: their tensors go to the library.
  tpt_status *st = tpt::capi::scoped_call(TPT_SCOPE_OFF, [&] { return call(&h); });
  dp = std::move(h.dp);
  h.magic = 0;
  return st;
}

std::vector<DataFlowPtr> dfs_arg(tpt_dataflow *const *dfs, size_t n) {
  require(dfs, "dfs");
  if (n == 0) tpt::invalid_argument("n is 0");
  std::vector<DataFlowPtr> out;
  for (size_t i = 0; i < n; ++i) {
    std::string entry = "dfs[" + std::to_string(i) + "]";
    out.push_back(df_arg(dfs[i], entry.c_str()));
  }
  return out;
}

// The status of a dataflow callback other than a source's next: TPT_STOP
// would split a pass in two, so it is an error there.
void raise_callback_status(tpt_status *st, const char *what) {
  if (st && tpt_status_code(st) == TPT_STOP) {
    std::string message = tpt_status_message(st);
    tpt_status_free(st);
    tpt::fail(TPT_ERR_CALLBACK, std::string(what) + " returned TPT_STOP (\"" + message +
                                    "\"); only a source's next callback ends a pass");
  }
  raise_status(st);
}

// A map function of the host's, given the datapoint's seed (tpt_datapoint_seed).
tpt::data::SeededMapFn map_fn(tpt_map_fn fn, std::shared_ptr<UserData> ud) {
  return [fn, ud](Datapoint &dp, uint64_t seed) {
    raise_callback_status(with_datapoint(
                              dp, [&](tpt_datapoint *h) { return fn(h, ud->data); }, &seed),
                          "a map callback");
  };
}

}  // namespace

tpt_status *tpt_datapoint_new(tpt_datapoint **out) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = new tpt_datapoint;
  });
}

void tpt_datapoint_free(tpt_datapoint *dp) {
  if (dp == nullptr || dp->magic != kDatapointMagic || dp->lent) return;
  dp->magic = 0;
  delete dp;
}

size_t tpt_datapoint_size(const tpt_datapoint *dp) {
  if (dp == nullptr || dp->magic != kDatapointMagic) return 0;
  return dp->dp.size();
}

tpt_status *tpt_datapoint_get(tpt_tensor **out, const tpt_datapoint *dp, size_t index) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    const Datapoint &d = dp_arg(dp).dp;
    if (index >= d.size())
      tpt::fail(TPT_ERR_NOT_FOUND,
                "index " + std::to_string(index) + " is out of range (the datapoint has " + std::to_string(d.size()) + " components)");
    tpt::capi::give(out, d[index]);
  });
}

tpt_status *tpt_datapoint_set(tpt_datapoint *dp, size_t index, const tpt_tensor *value) {
  return guard(__func__, [&] {
    Datapoint &d = dp_arg(dp).dp;
    const at::Tensor &v = tensor_arg(value, "value");
    if (index > d.size())
      tpt::invalid_argument("index " + std::to_string(index) + " is past the end (the datapoint has " +
                            std::to_string(d.size()) + " components; index == size appends)");
    if (index == d.size()) d.push_back(v);
    else d[index] = v;
  });
}

tpt_status *tpt_datapoint_truncate(tpt_datapoint *dp, size_t size) {
  return guard(__func__, [&] {
    Datapoint &d = dp_arg(dp).dp;
    if (size < d.size()) d.resize(size);
  });
}

tpt_status *tpt_datapoint_seed(uint64_t *out, const tpt_datapoint *dp) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = 0;
    const tpt_datapoint &d = dp_arg(dp);
    if (!d.has_seed)
      tpt::fail(TPT_ERR_STATE, "the datapoint has no seed: only the datapoint a map function (tpt_dataflow_map, "
                               "tpt_dataflow_parallel_map) is given has one");
    *out = d.seed;
  });
}

tpt_status *tpt_dataflow_from_callbacks(tpt_dataflow **out, const tpt_dataflow_callbacks *callbacks,
                                        void *user_data, void (*destroy)(void *)) {
  auto ud = std::make_shared<UserData>(user_data, destroy);
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    require(callbacks, "callbacks");
    if (callbacks->version < 1 || callbacks->version > TPT_DATAFLOW_CALLBACKS_VERSION)
      tpt::invalid_argument("callbacks->version is " + std::to_string(callbacks->version) +
                            " (initialise with TPT_DATAFLOW_CALLBACKS_INIT)");
    require(reinterpret_cast<void *>(callbacks->next), "callbacks->next");
    tpt::data::SourceFns fns;
    auto next = callbacks->next;
    fns.next = [next, ud](Datapoint &dp) {
      tpt_status *st = with_datapoint(dp, [&](tpt_datapoint *h) { return next(h, ud->data); });
      if (st && tpt_status_code(st) == TPT_STOP) {
        tpt_status_free(st);
        return false;
      }
      raise_status(st);
      if (dp.empty()) tpt::fail(TPT_ERR_CALLBACK, "the dataflow's next callback returned no component (return TPT_STOP at the end of a pass)");
      return true;
    };
    if (auto reset = callbacks->reset)
      fns.reset = [reset, ud](uint64_t seed) {
        tpt_status *st = tpt::capi::scoped_call(TPT_SCOPE_OFF, [&] { return reset(seed, ud->data); });
        raise_callback_status(st, "the reset callback");
      };
    if (auto size = callbacks->size) fns.size = [size, ud] { return size(ud->data); };
    if (callbacks->version >= 2) {  // a version 1 struct has no such fields (from_functions wants both or neither)
      if (auto save = callbacks->save) {
        fns.save = [save, ud] {
          tpt_tensor *t = nullptr;
          tpt_status *st = tpt::capi::scoped_call(TPT_SCOPE_OFF, [&] { return save(&t, ud->data); });
          raise_callback_status(st, "the save callback");
          std::unique_ptr<tpt_tensor, void (*)(tpt_tensor *)> owned(t, tpt_tensor_free);
          if (!t) tpt::fail(TPT_ERR_CALLBACK, "the save callback returned success but no tensor");
          const at::Tensor &v = tensor_arg(t, "the save callback's tensor");
          if (v.scalar_type() != at::kByte || v.dim() != 1)
            tpt::fail(TPT_ERR_CALLBACK, "the save callback must give a 1-d u8 tensor, got " +
                                            std::string(c10::toString(v.scalar_type())) + " with " +
                                            std::to_string(v.dim()) + " dimensions");
          at::Tensor c = v.cpu().contiguous();
          const uint8_t *b = c.data_ptr<uint8_t>();
          return std::vector<uint8_t>(b, b + c.numel());
        };
      }
      if (auto restore = callbacks->restore) {
        fns.restore = [restore, ud](const uint8_t *data, size_t n) {
          at::Tensor v = at::empty({static_cast<int64_t>(n)}, at::TensorOptions().dtype(at::kByte));
          if (n) std::memcpy(v.data_ptr<uint8_t>(), data, n);
          tpt_tensor h(v, tpt_tensor::Borrow{});  // lent for the call
          tpt_status *st = tpt::capi::scoped_call(TPT_SCOPE_OFF, [&] { return restore(&h, ud->data); });
          h.magic = 0;
          raise_callback_status(st, "the restore callback");
        };
      }
    }
    give(out, tpt::data::from_functions(std::move(fns)));
  });
}

tpt_status *tpt_dataflow_from_tensors(tpt_dataflow **out, const tpt_tensor *const *tensors, size_t n_tensors,
                                      int32_t shuffle) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    require(tensors, "tensors");
    if (n_tensors == 0) tpt::invalid_argument("n_tensors is 0");
    std::vector<at::Tensor> ts;
    for (size_t i = 0; i < n_tensors; ++i) {
      std::string entry = "tensors[" + std::to_string(i) + "]";
      ts.push_back(tensor_arg(tensors[i], entry.c_str()));
    }
    give(out, tpt::data::from_tensors(std::move(ts), shuffle != 0));
  });
}

tpt_status *tpt_dataflow_from_idx(tpt_dataflow **out, const char *const *paths, size_t n_paths, int32_t shuffle) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    require(paths, "paths");
    if (n_paths == 0) tpt::invalid_argument("n_paths is 0");
    std::vector<std::string> ps;
    for (size_t i = 0; i < n_paths; ++i) {
      std::string entry = "paths[" + std::to_string(i) + "]";
      ps.push_back(require(paths[i], entry.c_str()));
    }
    give(out, tpt::data::from_idx(ps, shuffle != 0));
  });
}

tpt_status *tpt_dataflow_mnist(tpt_dataflow **out, const char *dir, const char *split, int32_t shuffle) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    require(dir, "dir");
    require(split, "split");
    give(out, tpt::data::mnist(dir, split, shuffle != 0));
  });
}

tpt_status *tpt_dataflow_from_files(tpt_dataflow **out, const char *const *paths, size_t n_paths, int32_t shuffle,
                                    int32_t n_threads, tpt_decode_fn decode, void *user_data, void (*destroy)(void *)) {
  auto ud = std::make_shared<UserData>(user_data, destroy);
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    require(paths, "paths");
    require(reinterpret_cast<void *>(decode), "decode");
    if (n_threads < 0) tpt::invalid_argument("n_threads must be >= 0, got " + std::to_string(n_threads));
    auto list = std::make_shared<std::vector<std::string>>();
    for (size_t i = 0; i < n_paths; ++i) {
      std::string entry = "paths[" + std::to_string(i) + "]";
      list->push_back(require(paths[i], entry.c_str()));
    }
    tpt::data::SeededMapFn fn = [list, decode, ud](Datapoint &dp, uint64_t) {
      const size_t index = static_cast<size_t>(dp.at(0).item<int64_t>());
      dp.clear();
      raise_callback_status(
          with_datapoint(dp, [&](tpt_datapoint *h) { return decode(h, (*list)[index].c_str(), index, ud->data); }),
          "the decode callback");
      if (dp.empty())
        tpt::fail(TPT_ERR_CALLBACK, "the decode callback returned no component for " + (*list)[index]);
    };
    DataFlowPtr src = tpt::data::indices(static_cast<int64_t>(list->size()), shuffle != 0);
    if (n_threads == 0) {
      give(out, tpt::data::seeded_map(std::move(src), std::move(fn), "DataFromFiles"));
    } else {
      tpt::data::ParallelMapOptions o;
      o.n_threads = n_threads;
      o.ordered = true;
      o.strict = true;
      give(out, tpt::data::parallel_map(std::move(src), std::move(fn), o, "DataFromFiles"));
    }
  });
}

tpt_status *tpt_dataflow_fake(tpt_dataflow **out, const tpt_input_spec *components, size_t n_components, int64_t size,
                              int32_t random, double low, double high) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    require(components, "components");
    std::vector<tpt::data::FakeSpec> specs;
    for (size_t i = 0; i < n_components; ++i) {
      const tpt_input_spec &c = components[i];
      std::string entry = "components[" + std::to_string(i) + "]";
      if (c.ndim > 0) require(c.shape, (entry + ".shape").c_str());
      auto type = tpt::scalar_type_of(c.dtype);
      if (!type) tpt::invalid_argument(entry + ".dtype is not a tpt_dtype");
      specs.push_back({*type, std::vector<int64_t>(c.shape, c.shape + c.ndim)});
    }
    give(out, tpt::data::fake(std::move(specs), size, random != 0, low, high));
  });
}

tpt_status *tpt_dataflow_batch(tpt_dataflow **out, tpt_dataflow *df, int64_t batch_size, int32_t remainder) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    give(out, tpt::data::batch(df_arg(df), batch_size, remainder != 0));
  });
}

tpt_status *tpt_dataflow_map(tpt_dataflow **out, tpt_dataflow *df, tpt_map_fn fn, void *user_data,
                             void (*destroy)(void *)) {
  auto ud = std::make_shared<UserData>(user_data, destroy);
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    DataFlowPtr in = df_arg(df);
    require(reinterpret_cast<void *>(fn), "fn");
    give(out, tpt::data::seeded_map(std::move(in), map_fn(fn, ud), "MapData"));
  });
}

tpt_status *tpt_dataflow_map_component(tpt_dataflow **out, tpt_dataflow *df, size_t index, tpt_component_fn fn,
                                       void *user_data, void (*destroy)(void *)) {
  auto ud = std::make_shared<UserData>(user_data, destroy);
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    DataFlowPtr in = df_arg(df);
    require(reinterpret_cast<void *>(fn), "fn");
    auto f = [index, fn, ud](Datapoint &dp) {
      if (index >= dp.size())
        tpt::invalid_argument("MapDataComponent: component " + std::to_string(index) + " asked for, the datapoint has " +
                              std::to_string(dp.size()));
      tpt_tensor value(dp[index], tpt_tensor::Borrow{});
      tpt_tensor *made = nullptr;
      tpt_status *st = tpt::capi::scoped_call(TPT_SCOPE_OFF, [&] { return fn(&made, &value, ud->data); });
      value.magic = 0;
      if (made == &value) {
        // The lent input is not a new tensor (NULL would drop the datapoint).
        tpt_status_free(st);
        tpt::invalid_argument(
            "a map_component callback set *out to its input `value`, which is lent for the call: give a new "
            "handle (tpt_tensor_keep(out, value) to keep it unchanged) or NULL to drop the datapoint");
      }
      at::Tensor result;
      if (made && made->magic == kTensorMagic) result = made->value;
      tpt_tensor_free(made);
      raise_callback_status(st, "a map_component callback");
      if (!result.defined()) dp.clear();  // dropped
      else dp[index] = std::move(result);
    };
    give(out, tpt::data::map(std::move(in), std::move(f), "MapDataComponent"));
  });
}

tpt_status *tpt_dataflow_parallel_map(tpt_dataflow **out, tpt_dataflow *df, tpt_map_fn fn, void *user_data,
                                      void (*destroy)(void *), const tpt_parallel_map_options *options) {
  auto ud = std::make_shared<UserData>(user_data, destroy);
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    DataFlowPtr in = df_arg(df);
    require(reinterpret_cast<void *>(fn), "fn");
    tpt_parallel_map_options o = TPT_PARALLEL_MAP_OPTIONS_INIT;
    if (options) {
      if (options->version < 1 || options->version > TPT_PARALLEL_MAP_OPTIONS_VERSION)
        tpt::invalid_argument("options->version is " + std::to_string(options->version) +
                              " (initialise with TPT_PARALLEL_MAP_OPTIONS_INIT)");
      o = *options;
    }
    tpt::data::ParallelMapOptions po;
    po.n_threads = o.n_threads;
    po.buffer_size = o.buffer_size;
    po.ordered = o.ordered != 0;
    po.strict = o.strict != 0;
    give(out, tpt::data::parallel_map(std::move(in), map_fn(fn, ud), po));
  });
}

tpt_status *tpt_dataflow_prefetch(tpt_dataflow **out, tpt_dataflow *df, int64_t capacity) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    give(out, tpt::data::prefetch(df_arg(df), capacity));
  });
}

tpt_status *tpt_dataflow_local_shuffle(tpt_dataflow **out, tpt_dataflow *df, int64_t buffer_size, int64_t n_reuse) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    give(out, tpt::data::local_shuffle(df_arg(df), buffer_size, n_reuse));
  });
}

tpt_status *tpt_dataflow_cache(tpt_dataflow **out, tpt_dataflow *df, int32_t shuffle) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    give(out, tpt::data::cache(df_arg(df), shuffle != 0));
  });
}

tpt_status *tpt_dataflow_repeat(tpt_dataflow **out, tpt_dataflow *df, int64_t n) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    give(out, tpt::data::repeat(df_arg(df), n));
  });
}

tpt_status *tpt_dataflow_fixed_size(tpt_dataflow **out, tpt_dataflow *df, int64_t size, int32_t keep_state) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    give(out, tpt::data::fixed_size(df_arg(df), size, keep_state != 0));
  });
}

tpt_status *tpt_dataflow_shard(tpt_dataflow **out, tpt_dataflow *df, int64_t index, int64_t count) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    give(out, tpt::data::shard(df_arg(df), index, count));
  });
}

tpt_status *tpt_dataflow_concat(tpt_dataflow **out, tpt_dataflow *const *dfs, size_t n) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    give(out, tpt::data::concat(dfs_arg(dfs, n)));
  });
}

tpt_status *tpt_dataflow_join(tpt_dataflow **out, tpt_dataflow *const *dfs, size_t n) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    give(out, tpt::data::join(dfs_arg(dfs, n)));
  });
}

tpt_status *tpt_dataflow_select(tpt_dataflow **out, tpt_dataflow *df, const size_t *indices, size_t n) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    DataFlowPtr in = df_arg(df);
    require(indices, "indices");
    give(out, tpt::data::select(std::move(in), std::vector<size_t>(indices, indices + n)));
  });
}

tpt_status *tpt_dataflow_augment(tpt_dataflow **out, tpt_dataflow *df, size_t index, const tpt_augmentor *augmentors,
                                 size_t n_augmentors, int32_t n_threads) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    DataFlowPtr in = df_arg(df);
    require(augmentors, "augmentors");
    std::vector<tpt::data::Augmentor> augs;
    for (size_t i = 0; i < n_augmentors; ++i) {
      const tpt_augmentor &a = augmentors[i];
      const std::string entry = "augmentors[" + std::to_string(i) + "]";
      // One version for the array (its elements' stride); only 1 so far.
      if (a.version != TPT_AUGMENTOR_VERSION)
        tpt::invalid_argument(entry + ".version is " + std::to_string(a.version) + (a.version == 0 ? " (an unversioned struct)" : "") +
                              ": initialise each augmentor with TPT_AUGMENTOR_INIT (version " +
                              std::to_string(TPT_AUGMENTOR_VERSION) + ")");
      // Checked before the cast: a value outside Augmentor::Kind's range is undefined behaviour.
      if (tpt::enum_int(a.kind) < TPT_AUGMENT_TO_FLOAT || tpt::enum_int(a.kind) > TPT_AUGMENT_FLIP)
        tpt::invalid_argument(entry + ": unknown kind " + std::to_string(tpt::enum_int(a.kind)));
      tpt::data::Augmentor g;
      g.kind = static_cast<tpt::data::Augmentor::Kind>(a.kind);
      g.scale = a.scale;
      if (a.kind == TPT_AUGMENT_NORMALIZE) {
        if (a.n_channels == 0) tpt::invalid_argument(entry + ".n_channels is 0");
        require(a.mean, (entry + ".mean").c_str());
        require(a.std, (entry + ".std").c_str());
        g.mean.assign(a.mean, a.mean + a.n_channels);
        g.std.assign(a.std, a.std + a.n_channels);
      }
      g.height = a.height;
      g.width = a.width;
      g.padding = a.padding;
      g.probability = a.probability;
      augs.push_back(std::move(g));
    }
    give(out, tpt::data::augment(std::move(in), index, std::move(augs), n_threads));
  });
}

tpt_status *tpt_dataflow_reset_state(tpt_dataflow *df) {
  return guard(__func__, [&] {
    DataFlowPtr keep = own_df_arg(df);
    Iterating in(keep.get(), "tpt_dataflow_reset_state");
    keep->reset_state();
  });
}

tpt_status *tpt_dataflow_next(tpt_dataflow *df, tpt_datapoint *dp) {
  return guard(__func__, [&] {
    DataFlowPtr keep = own_df_arg(df);
    Iterating in(keep.get(), "tpt_dataflow_next");
    tpt::data::DataFlow &d = *keep;
    Datapoint &p = dp_arg(dp).dp;
    if (!d.was_reset()) d.reset_state();
    if (!d.next(p)) {
      p.clear();
      throw tpt::StopTraining("end of the pass");
    }
  });
}

tpt_status *tpt_dataflow_size(int64_t *out, const tpt_dataflow *df) {
  return guard(__func__, [&] {
    require(out, "out");
    auto n = df_arg(df)->size();
    *out = n ? *n : -1;
  });
}

tpt_status *tpt_dataflow_set_seed(tpt_dataflow *df, uint64_t seed) {
  return guard(__func__, [&] { df_arg(df)->set_seed(seed); });
}

tpt_status *tpt_dataflow_get_state(tpt_tensor **out, const tpt_dataflow *df) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    DataFlowPtr keep = own_df_arg(df, "take the state of that one");
    Iterating in(keep.get(), "tpt_dataflow_get_state");
    std::vector<uint8_t> bytes = keep->get_state();
    at::Tensor t = at::empty({static_cast<int64_t>(bytes.size())}, at::TensorOptions().dtype(at::kByte));
    std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
    tpt::capi::give(out, std::move(t));
  });
}

tpt_status *tpt_dataflow_set_state(tpt_dataflow *df, const tpt_tensor *state) {
  return guard(__func__, [&] {
    DataFlowPtr keep = own_df_arg(df, "set the state of that one");
    Iterating in(keep.get(), "tpt_dataflow_set_state");
    tpt::data::DataFlow &d = *keep;
    at::Tensor t = tensor_arg(state, "state");
    if (t.scalar_type() != at::kByte || t.dim() != 1)
      tpt::invalid_argument("state must be a 1-d u8 tensor (from tpt_dataflow_get_state)");
    t = t.contiguous().cpu();
    d.set_state(t.data_ptr<uint8_t>(), static_cast<size_t>(t.numel()));
  });
}

void tpt_dataflow_free(tpt_dataflow *df) {
  if (df == nullptr || df->magic != kDataflowMagic) return;
  df->magic = 0;
  delete df;
}
