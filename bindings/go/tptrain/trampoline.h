/* C shims for the Go binding: they pass the exported Go trampolines
 * (trampoline_export.go) to the library, with a runtime/cgo.Handle as
 * user_data. A handle travels as uintptr_t between Go and C, so that no Go
 * pointer is ever stored in C memory. */
#ifndef TPTRAIN_GO_TRAMPOLINE_H
#define TPTRAIN_GO_TRAMPOLINE_H

#include <stdint.h>
#include <tptrain.h>

/* tpt_trainer_set_run_step with the run_step trampoline; destroy deletes
 * the handle. */
tpt_status *tptgo_set_run_step(tpt_trainer *trainer, uintptr_t handle);

/* tpt_trainer_hooked_step with the step trampoline; handle 0 runs the hooks
 * only (step NULL). */
tpt_status *tptgo_hooked_step(tpt_trainer *trainer, uintptr_t handle);

/* tpt_callback_new with the callback trampoline; destroy deletes the handle.
 * With stateful, the save and restore trampolines too. */
tpt_status *tptgo_callback_new(tpt_callback **out, uint32_t events, const char *name,
                               int32_t chief_only, uintptr_t handle, int32_t stateful);

/* tpt_callback_enable_if with the predicate trampoline; destroy deletes the
 * handle. */
tpt_status *tptgo_enable_if(tpt_callback **out, tpt_callback *inner, uintptr_t handle);

/* tpt_tensor_from_blob with the deleter trampoline (it deletes the handle);
 * handle 0: no deleter. */
tpt_status *tptgo_tensor_from_blob(tpt_tensor **out, void *data, const int64_t *shape, size_t ndim,
                                   const tpt_tensor_options *options, uintptr_t handle);

/* Calls the deleter of a DLManagedTensor (if any); NULL is a no-op. */
void tptgo_dlpack_delete(void *managed);

/* tpt_model_new with the tower trampoline; destroy deletes the handle. */
tpt_status *tptgo_model_new(tpt_model **out, const tpt_input_spec *inputs, size_t n_inputs,
                            uintptr_t handle);

/* tpt_input_from_feed with the feed trampoline; destroy deletes the handle. */
tpt_status *tptgo_input_from_feed(tpt_input **out, uintptr_t handle);

/* tpt_trainer_from_config of a config made of these fields, with the init
 * trampoline when init_handle is not 0 (borrowed: the caller deletes it
 * after freeing the trainer); towers NULL: the simple trainer; distributed
 * NULL: one process; input_options NULL: the defaults. */
tpt_status *tptgo_trainer_from_config(tpt_trainer **out, const tpt_trainer_options *options,
                                      tpt_model *model, tpt_input *input, tpt_dataflow *dataflow,
                                      tpt_callback **callbacks, size_t n_callbacks,
                                      tpt_callback **monitors, size_t n_monitors,
                                      uintptr_t init_handle, const tpt_towers_options *towers,
                                      const tpt_distributed_options *distributed,
                                      const tpt_input_options *input_options);

/* ---- Dataflows: each deletes its handle through destroy (also when it
 * fails). */

/* tpt_dataflow_from_callbacks with the source trampolines (reset, size, and
 * save with restore, only when has_reset / has_size / has_state). */
tpt_status *tptgo_dataflow_from_callbacks(tpt_dataflow **out, uintptr_t handle, int32_t has_reset,
                                          int32_t has_size, int32_t has_state);

/* tpt_dataflow_map with the map trampoline. */
tpt_status *tptgo_dataflow_map(tpt_dataflow **out, tpt_dataflow *df, uintptr_t handle);

/* tpt_dataflow_map_component with the component trampoline. */
tpt_status *tptgo_dataflow_map_component(tpt_dataflow **out, tpt_dataflow *df, size_t index,
                                         uintptr_t handle);

/* tpt_dataflow_parallel_map with the map trampoline. */
tpt_status *tptgo_dataflow_parallel_map(tpt_dataflow **out, tpt_dataflow *df, uintptr_t handle,
                                        const tpt_parallel_map_options *options);

/* tpt_dataflow_from_files with the decode trampoline. */
tpt_status *tptgo_dataflow_from_files(tpt_dataflow **out, char **paths, size_t n_paths,
                                      int32_t shuffle, int32_t n_threads, uintptr_t handle);

/* ---- Inference and hyper-parameter functions: each deletes its handle
 * through destroy (also when it fails). */

/* tpt_inferencer_new with the inferencer trampolines (before and after only
 * when has_before / has_after); name NULL: the library's default. */
tpt_status *tptgo_inferencer_new(tpt_inferencer **out, const char *name, char **outputs, size_t n_outputs,
                                 int32_t has_before, int32_t has_after, uintptr_t handle);

/* tpt_callback_hyperparam_func with the hyper-parameter trampoline. */
tpt_status *tptgo_callback_hyperparam_func(tpt_callback **out, tpt_optimizer *optimizer, const char *param,
                                           uintptr_t handle);

#endif
