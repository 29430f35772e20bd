// The C side of the trampolines: adapters from the library's function types
// to the Go functions exported in callbacks_export.go.
#include "_cgo_export.h"
#include "trampoline.h"

static tpt_status *run_step_trampoline(tpt_trainer *trainer, void *user_data) {
  return tptgoRunStep(trainer, (uintptr_t)user_data);
}

static tpt_status *step_trampoline(tpt_trainer *trainer, void *user_data) {
  return tptgoStep(trainer, (uintptr_t)user_data);
}

static tpt_status *callback_trampoline(tpt_trainer *trainer, tpt_event event, const tpt_record *record,
                                       void *user_data) {
  return tptgoCallback(trainer, (uint32_t)event, (tpt_record *)record, (uintptr_t)user_data);
}

static int32_t predicate_trampoline(tpt_trainer *trainer, void *user_data) {
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

tpt_status *tptgo_callback_new(tpt_callback **out, uint32_t events, const char *name, int32_t chief_only,
                               uintptr_t handle) {
  tpt_callback_desc desc = TPT_CALLBACK_DESC_INIT;
  desc.events = events;
  desc.name = name;
  desc.chief_only = chief_only;
  desc.fn = callback_trampoline;
  desc.user_data = (void *)handle;
  desc.destroy = delete_handle;
  return tpt_callback_new(out, &desc);
}

tpt_status *tptgo_enable_if(tpt_callback **out, tpt_callback *inner, uintptr_t handle) {
  return tpt_callback_enable_if(out, inner, predicate_trampoline, (void *)handle, delete_handle);
}
