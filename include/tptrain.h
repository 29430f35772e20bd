/*
 * tptrain.h: the whole public C ABI of tptrain, the one header users include.
 *
 * tptrain brings tensorpack's Trainer to LibTorch for any host that can call C.
 * This header is the contract: a function, type or constant that is not declared
 * here is not part of the API. It is plain C11 (it also compiles as C++) and
 * includes nothing from LibTorch.
 *
 * Conventions (docs/conventions.md has the long form):
 *   - Names are tpt_<module>_<verb>; types tpt_x; macros and enum values TPT_.
 *   - Out-parameters come first, then the subject handle, then inputs, then
 *     (callback, user_data).
 *   - A fallible function returns tpt_status *: NULL means success. A non-NULL
 *     status is owned by the caller and released with tpt_status_free. There is
 *     no thread-local error state.
 *   - No C++ exception ever leaves a tpt_ function. A bad argument gets a status
 *     whose message names the function and the argument.
 *   - Every *_free accepts NULL. Handles are opaque.
 *   - Option structs start with a `version` field, only grow at the end, and are
 *     initialised with their _INIT macro. Passing NULL options means defaults.
 *   - Enums have explicit values and are never renumbered.
 *   - Each function says which thread may call it and who owns what it returns.
 *
 * The API is split by module, one header each under tptrain/ (tptrain/trainer.h
 * declares tpt_trainer_*, tptrain/dataflow.h tpt_dataflow_*, ...), each
 * implemented by src/capi/<module>.cpp; docs/ARCHITECTURE.md maps them onto
 * the Rust modules and the Go files. Include this header, not the modules.
 */
#ifndef TPTRAIN_H
#define TPTRAIN_H

#include "tptrain/common.h"
#include "tptrain/runtime.h"
#include "tptrain/tensor.h"
#include "tptrain/op.h"
#include "tptrain/image.h"
#include "tptrain/callback.h"
#include "tptrain/tower.h"
#include "tptrain/model.h"
#include "tptrain/layer.h"
#include "tptrain/optimizer.h"
#include "tptrain/dataflow.h"
#include "tptrain/input.h"
#include "tptrain/strategy.h"
#include "tptrain/inference.h"
#include "tptrain/trainer.h"
#include "tptrain/launch.h"

#endif /* TPTRAIN_H */
