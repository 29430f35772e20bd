// The C side of the trampolines: adapters from the library's function types
// to the Go functions exported in trampoline_export.go.
#include "_cgo_export.h"
#include "trampoline.h"

/* Called first thing by the trampolines that the library runs inside a tensor
 * scope (tower functions, trainer callbacks): a Go Tensor made in the call
 * is released when the call returns, and its handle waits for Close or the
 * finalizer (TPT_SCOPE_EXPIRE), so tower tensors need no Close. */
static void expire_call_tensors(void) { tpt_status_free(tpt_tensor_scope_set_mode(TPT_SCOPE_EXPIRE)); }

static tpt_status *run_step_trampoline(tpt_trainer *trainer, void *user_data) {
  expire_call_tensors();
  return tptgoRunStep(trainer, (uintptr_t)user_data);
}

static tpt_status *step_trampoline(tpt_trainer *trainer, void *user_data) {
  expire_call_tensors();
  return tptgoStep(trainer, (uintptr_t)user_data);
}

static tpt_status *callback_trampoline(tpt_trainer *trainer, tpt_event event, const tpt_record *record,
                                       void *user_data) {
  expire_call_tensors();
  return tptgoCallback(trainer, (uint32_t)event, (tpt_record *)record, (uintptr_t)user_data);
}

static int32_t predicate_trampoline(tpt_trainer *trainer, void *user_data) {
  expire_call_tensors();
  return tptgoPredicate(trainer, (uintptr_t)user_data);
}

static void delete_handle(void *user_data) { tptgoDeleteHandle((uintptr_t)user_data); }

tpt_status *tptgo_set_run_step(tpt_trainer *trainer, uintptr_t handle) {
  return tpt_trainer_set_run_step(trainer, run_step_trampoline, (void *)handle, delete_handle);
}

tpt_status *tptgo_hooked_step(tpt_trainer *trainer, uintptr_t handle) {
  if (handle == 0) return tpt_trainer_hooked_step(trainer, NULL, NULL);
  return tpt_trainer_hooked_step(trainer, step_trampoline, (void *)handle);
}

static tpt_status *callback_save_trampoline(tpt_tensor **out, void *user_data) {
  return tptgoCallbackSave(out, (uintptr_t)user_data);
}

static tpt_status *callback_restore_trampoline(const tpt_tensor *state, void *user_data) {
  return tptgoCallbackRestore((tpt_tensor *)state, (uintptr_t)user_data);
}

tpt_status *tptgo_callback_new(tpt_callback **out, uint32_t events, const char *name, int32_t chief_only,
                               uintptr_t handle, int32_t stateful) {
  tpt_callback_desc desc = TPT_CALLBACK_DESC_INIT;
  desc.events = events;
  desc.name = name;
  desc.chief_only = chief_only;
  desc.fn = callback_trampoline;
  desc.user_data = (void *)handle;
  desc.destroy = delete_handle;
  if (stateful) {
    desc.save = callback_save_trampoline;
    desc.restore = callback_restore_trampoline;
  }
  return tpt_callback_new(out, &desc);
}

tpt_status *tptgo_enable_if(tpt_callback **out, tpt_callback *inner, uintptr_t handle) {
  return tpt_callback_enable_if(out, inner, predicate_trampoline, (void *)handle, delete_handle);
}

/* ---- Tensors: from_blob's deleter, DLPack ---- */

static void blob_deleter(void *data, void *ctx) { tptgoBlobDelete(data, (uintptr_t)ctx); }

tpt_status *tptgo_tensor_from_blob(tpt_tensor **out, void *data, const int64_t *shape, size_t ndim,
                                   const tpt_tensor_options *options, uintptr_t handle) {
  if (handle == 0) return tpt_tensor_from_blob(out, data, shape, ndim, options, NULL, NULL);
  return tpt_tensor_from_blob(out, data, shape, ndim, options, blob_deleter, (void *)handle);
}

/* The layout of DLManagedTensor in dlpack.h (DLPACK_VERSION 0.6, unchanged
 * since 0.2), mirrored under another name: only the deleter is read. */
typedef struct {
  void *data;
  struct {
    int32_t device_type;
    int32_t device_id;
  } device;
  int32_t ndim;
  struct {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
  } dtype;
  int64_t *shape;
  int64_t *strides;
  uint64_t byte_offset;
} tptgo_dl_tensor;

typedef struct tptgo_dl_managed_tensor {
  tptgo_dl_tensor dl_tensor;
  void *manager_ctx;
  void (*deleter)(struct tptgo_dl_managed_tensor *self);
} tptgo_dl_managed_tensor;

void tptgo_dlpack_delete(void *managed) {
  tptgo_dl_managed_tensor *m = managed;
  if (m != NULL && m->deleter != NULL) m->deleter(m);
}

/* ---- Models and inputs ---- */

static tpt_status *tower_trampoline(tpt_tower *tower, const tpt_tensor *const *inputs, size_t n_inputs,
                                    void *user_data) {
  expire_call_tensors();
  return tptgoTower(tower, (tpt_tensor **)inputs, n_inputs, (uintptr_t)user_data);
}

static tpt_status *feed_trampoline(tpt_tensor **batch, size_t n_inputs, void *user_data) {
  return tptgoFeed(batch, n_inputs, (uintptr_t)user_data);
}

tpt_status *tptgo_model_new(tpt_model **out, const tpt_input_spec *inputs, size_t n_inputs, uintptr_t handle) {
  return tpt_model_new(out, inputs, n_inputs, tower_trampoline, (void *)handle, delete_handle);
}

tpt_status *tptgo_input_from_feed(tpt_input **out, uintptr_t handle) {
  return tpt_input_from_feed(out, feed_trampoline, (void *)handle, delete_handle);
}

/* ---- TrainConfig ---- */

static tpt_status *init_trampoline(tpt_model *model, void *user_data) {
  expire_call_tensors();
  return tptgoInit(model, (uintptr_t)user_data);
}

tpt_status *tptgo_trainer_from_config(tpt_trainer **out, const tpt_trainer_options *options, tpt_model *model,
                                      tpt_input *input, tpt_dataflow *dataflow, tpt_callback **callbacks,
                                      size_t n_callbacks, tpt_callback **monitors, size_t n_monitors,
                                      uintptr_t init_handle, const tpt_towers_options *towers,
                                      const tpt_distributed_options *distributed,
                                      const tpt_input_options *input_options) {
  tpt_train_config config = TPT_TRAIN_CONFIG_INIT;
  config.version = 5; /* the fields set here: up to input_options */
  config.options = options;
  config.model = model;
  config.input = input;
  config.dataflow = dataflow;
  config.callbacks = callbacks;
  config.n_callbacks = n_callbacks;
  config.monitors = monitors;
  config.n_monitors = n_monitors;
  config.towers = towers;
  config.distributed = distributed;
  config.input_options = input_options;
  if (init_handle != 0) {
    config.init = init_trampoline;
    config.init_user_data = (void *)init_handle;
  }
  return tpt_trainer_from_config(out, &config);
}

/* ---- Dataflows ---- */

static tpt_status *source_next_trampoline(tpt_datapoint *dp, void *user_data) {
  return tptgoSourceNext(dp, (uintptr_t)user_data);
}

static tpt_status *source_reset_trampoline(uint64_t seed, void *user_data) {
  return tptgoSourceReset(seed, (uintptr_t)user_data);
}

static int64_t source_size_trampoline(void *user_data) { return tptgoSourceSize((uintptr_t)user_data); }

static tpt_status *source_save_trampoline(tpt_tensor **out, void *user_data) {
  return tptgoSourceSave(out, (uintptr_t)user_data);
}

static tpt_status *source_restore_trampoline(const tpt_tensor *state, void *user_data) {
  return tptgoSourceRestore((tpt_tensor *)state, (uintptr_t)user_data);
}

tpt_status *tptgo_dataflow_from_callbacks(tpt_dataflow **out, uintptr_t handle, int32_t has_reset,
                                          int32_t has_size, int32_t has_state) {
  tpt_dataflow_callbacks callbacks = TPT_DATAFLOW_CALLBACKS_INIT; /* version 2 */
  callbacks.next = source_next_trampoline;
  if (has_reset) callbacks.reset = source_reset_trampoline;
  if (has_size) callbacks.size = source_size_trampoline;
  if (has_state) {
    callbacks.save = source_save_trampoline;
    callbacks.restore = source_restore_trampoline;
  }
  return tpt_dataflow_from_callbacks(out, &callbacks, (void *)handle, delete_handle);
}

static tpt_status *map_trampoline(tpt_datapoint *dp, void *user_data) {
  return tptgoMap(dp, (uintptr_t)user_data);
}

tpt_status *tptgo_dataflow_map(tpt_dataflow **out, tpt_dataflow *df, uintptr_t handle) {
  return tpt_dataflow_map(out, df, map_trampoline, (void *)handle, delete_handle);
}

static tpt_status *component_trampoline(tpt_tensor **out, const tpt_tensor *value, void *user_data) {
  return tptgoComponent(out, (tpt_tensor *)value, (uintptr_t)user_data);
}

tpt_status *tptgo_dataflow_map_component(tpt_dataflow **out, tpt_dataflow *df, size_t index, uintptr_t handle) {
  return tpt_dataflow_map_component(out, df, index, component_trampoline, (void *)handle, delete_handle);
}

tpt_status *tptgo_dataflow_parallel_map(tpt_dataflow **out, tpt_dataflow *df, uintptr_t handle,
                                        const tpt_parallel_map_options *options) {
  return tpt_dataflow_parallel_map(out, df, map_trampoline, (void *)handle, delete_handle, options);
}

static tpt_status *decode_trampoline(tpt_datapoint *dp, const char *path, size_t index, void *user_data) {
  return tptgoDecode(dp, (char *)path, index, (uintptr_t)user_data);
}

tpt_status *tptgo_dataflow_from_files(tpt_dataflow **out, char **paths, size_t n_paths, int32_t shuffle,
                                      int32_t n_threads, uintptr_t handle) {
  return tpt_dataflow_from_files(out, (const char *const *)paths, n_paths, shuffle, n_threads, decode_trampoline,
                                 (void *)handle, delete_handle);
}

/* ---- Inference and hyper-parameter functions ---- */

/* They run inside a trainer callback (the inference runner's, a
 * hyper-parameter setter's), on the training thread: a Go Tensor made in the
 * call is released with the callback's scope. */

static tpt_status *inferencer_before_trampoline(void *user_data) {
  expire_call_tensors();
  return tptgoInferencerBefore((uintptr_t)user_data);
}

static tpt_status *inferencer_outputs_trampoline(const tpt_tensor *const *outputs, size_t n_outputs, int64_t rows,
                                                 void *user_data) {
  expire_call_tensors();
  return tptgoInferencerOutputs((tpt_tensor **)outputs, n_outputs, rows, (uintptr_t)user_data);
}

static tpt_status *inferencer_after_trampoline(tpt_trainer *trainer, void *user_data) {
  expire_call_tensors();
  return tptgoInferencerAfter(trainer, (uintptr_t)user_data);
}

tpt_status *tptgo_inferencer_new(tpt_inferencer **out, const char *name, char **outputs, size_t n_outputs,
                                 int32_t has_before, int32_t has_after, uintptr_t handle) {
  tpt_inferencer_desc desc = TPT_INFERENCER_DESC_INIT;
  desc.name = name;
  desc.outputs = (const char *const *)outputs;
  desc.n_outputs = n_outputs;
  if (has_before) desc.before = inferencer_before_trampoline;
  desc.on_outputs = inferencer_outputs_trampoline;
  if (has_after) desc.after = inferencer_after_trampoline;
  desc.user_data = (void *)handle;
  desc.destroy = delete_handle;
  return tpt_inferencer_new(out, &desc);
}

static tpt_status *hyperparam_trampoline(double *value, int64_t epoch_num, double current, void *user_data) {
  expire_call_tensors();
  return tptgoHyperParam(value, epoch_num, current, (uintptr_t)user_data);
}

tpt_status *tptgo_callback_hyperparam_func(tpt_callback **out, tpt_optimizer *optimizer, const char *param,
                                           uintptr_t handle) {
  return tpt_callback_hyperparam_func(out, optimizer, param, hyperparam_trampoline, (void *)handle, delete_handle);
}
