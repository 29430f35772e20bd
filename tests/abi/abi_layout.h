/* Shared by abi_c11.c and abi_cpp17.cpp: the ABI facts that must never change
 * within one TPT_ABI_VERSION. Each check prints one TAP line. Adding a field at
 * the end of a struct grows the expected size here; moving one is a break. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "tptrain.h"

static int abi_n, abi_failed;

static void abi_check(int ok, const char *what) {
  ++abi_n;
  if (!ok) abi_failed = 1;
  printf("%s %d - %s\n", ok ? "ok" : "not ok", abi_n, what);
}

#define ABI_EQ(a, b) abi_check((long long)(a) == (long long)(b), #a " == " #b)

static int abi_run(const char *lang) {
  printf("TAP version 13\n# header compiled as %s with -Wall -Wextra -Werror -pedantic\n", lang);
  /* enum values are part of the ABI */
  ABI_EQ(TPT_OK, 0);
  ABI_EQ(TPT_ERR_INVALID_ARGUMENT, 1);
  ABI_EQ(TPT_ERR_OUT_OF_MEMORY, 2);
  ABI_EQ(TPT_ERR_BACKEND, 3);
  ABI_EQ(TPT_ERR_INTERNAL, 4);
  ABI_EQ(TPT_ERR_UNKNOWN, 5);
  ABI_EQ(TPT_ERR_CALLBACK, 6);
  ABI_EQ(TPT_ERR_IO, 7);
  ABI_EQ(TPT_ERR_STATE, 8);
  ABI_EQ(TPT_ERR_UNSUPPORTED, 9);
  ABI_EQ(TPT_ERR_NOT_FOUND, 10);
  ABI_EQ(TPT_ERR_TIMEOUT, 11);
  ABI_EQ(TPT_STOP, 100);
  ABI_EQ(TPT_FEATURE_GLOO, 1);
  ABI_EQ(TPT_FEATURE_CUDA, 2);
  ABI_EQ(TPT_FEATURE_NCCL, 3);
  ABI_EQ(TPT_FLOAT32_DEFAULT, 0);
  ABI_EQ(TPT_FLOAT32_IEEE, 1);
  ABI_EQ(TPT_FLOAT32_TF32, 2);
  ABI_EQ(TPT_DETERMINISM_DEFAULT, 0);
  ABI_EQ(TPT_DETERMINISM_WARN, 1);
  ABI_EQ(TPT_DETERMINISM_ON, 2);
  ABI_EQ(TPT_DTYPE_F32, 1);
  ABI_EQ(TPT_DTYPE_F64, 2);
  ABI_EQ(TPT_DTYPE_F16, 3);
  ABI_EQ(TPT_DTYPE_BF16, 4);
  ABI_EQ(TPT_DTYPE_I64, 5);
  ABI_EQ(TPT_DTYPE_I32, 6);
  ABI_EQ(TPT_DTYPE_U8, 7);
  ABI_EQ(TPT_DTYPE_BOOL, 8);
  /* enums are 32-bit */
  ABI_EQ(sizeof(tpt_code), 4);
  ABI_EQ(sizeof(tpt_dtype), 4);
  ABI_EQ(sizeof(tpt_feature), 4);
  ABI_EQ(sizeof(tpt_float32_precision), 4);
  ABI_EQ(sizeof(tpt_determinism), 4);
  /* versioned option structs: version first, fields only appended */
  ABI_EQ(TPT_TENSOR_OPTIONS_VERSION, 1);
  ABI_EQ(offsetof(tpt_tensor_options, version), 0);
  ABI_EQ(offsetof(tpt_tensor_options, dtype), 4);
  ABI_EQ(offsetof(tpt_tensor_options, device), 8);
  ABI_EQ(offsetof(tpt_tensor_options, requires_grad), 8 + sizeof(void *));
  ABI_EQ(sizeof(tpt_tensor_options), 8 + 2 * sizeof(void *));
  {
    tpt_tensor_options o = TPT_TENSOR_OPTIONS_INIT;
    ABI_EQ(o.version, TPT_TENSOR_OPTIONS_VERSION);
    ABI_EQ(o.dtype, TPT_DTYPE_F32);
    abi_check(o.device == NULL, "TPT_TENSOR_OPTIONS_INIT device is NULL");
    ABI_EQ(o.requires_grad, 0);
  }
  ABI_EQ(TPT_SCOPE_FREE, 0);
  ABI_EQ(TPT_SCOPE_EXPIRE, 1);
  ABI_EQ(TPT_SCOPE_OFF, 2);
  /* trainer enums */
  ABI_EQ(TPT_LOGDIR_REFUSE, 0);
  ABI_EQ(TPT_LOGDIR_KEEP, 1);
  ABI_EQ(TPT_LOGDIR_DELETE, 2);
  ABI_EQ(TPT_LOGDIR_BACKUP, 3);
  ABI_EQ(TPT_LOGDIR_NEW, 4);
  ABI_EQ(TPT_LOGDIR_ASK, 5);
  ABI_EQ(TPT_PROGRESS_AUTO, 0);
  ABI_EQ(TPT_PROGRESS_BAR, 1);
  ABI_EQ(TPT_PROGRESS_LINES, 2);
  ABI_EQ(TPT_PROGRESS_OFF, 3);
  ABI_EQ(TPT_EVENT_SETUP, 1);
  ABI_EQ(TPT_EVENT_BEFORE_TRAIN, 2);
  ABI_EQ(TPT_EVENT_BEFORE_EPOCH, 4);
  ABI_EQ(TPT_EVENT_BEFORE_RUN, 8);
  ABI_EQ(TPT_EVENT_AFTER_RUN, 16);
  ABI_EQ(TPT_EVENT_TRIGGER_STEP, 32);
  ABI_EQ(TPT_EVENT_AFTER_EPOCH, 64);
  ABI_EQ(TPT_EVENT_TRIGGER_EPOCH, 128);
  ABI_EQ(TPT_EVENT_TRIGGER, 256);
  ABI_EQ(TPT_EVENT_AFTER_TRAIN, 512);
  ABI_EQ(TPT_EVENT_RECORD, 1024);
  ABI_EQ(TPT_EVENT_ALL, 2047);
  ABI_EQ(TPT_RECORD_SCALAR, 1);
  ABI_EQ(TPT_RECORD_IMAGE, 2);
  ABI_EQ(sizeof(tpt_event), 4);
  /* tpt_trainer_options (LP64 numbers) */
  ABI_EQ(TPT_PRECISION_FP32, 0);
  ABI_EQ(TPT_PRECISION_BF16_MIXED, 1);
  ABI_EQ(TPT_PRECISION_FP16_MIXED, 2);
  ABI_EQ(TPT_TRAINER_OPTIONS_VERSION, 7);
  ABI_EQ(offsetof(tpt_trainer_options, version), 0);
  ABI_EQ(offsetof(tpt_trainer_options, is_chief), 4);
  ABI_EQ(offsetof(tpt_trainer_options, starting_epoch), 8);
  ABI_EQ(offsetof(tpt_trainer_options, max_epoch), 16);
  ABI_EQ(offsetof(tpt_trainer_options, steps_per_epoch), 24);
  ABI_EQ(offsetof(tpt_trainer_options, logdir), 32);
  ABI_EQ(offsetof(tpt_trainer_options, logdir_action), 32 + sizeof(void *));
  ABI_EQ(offsetof(tpt_trainer_options, progress), 36 + sizeof(void *));
  ABI_EQ(offsetof(tpt_trainer_options, console), 40 + sizeof(void *));
  ABI_EQ(offsetof(tpt_trainer_options, default_callbacks), 44 + sizeof(void *));
  ABI_EQ(offsetof(tpt_trainer_options, default_monitors), 48 + sizeof(void *));
  ABI_EQ(offsetof(tpt_trainer_options, scalar_history), 56 + sizeof(void *));
  ABI_EQ(offsetof(tpt_trainer_options, summary_period), 64 + sizeof(void *));
  ABI_EQ(offsetof(tpt_trainer_options, auto_resume), 72 + sizeof(void *));
  ABI_EQ(offsetof(tpt_trainer_options, stop_on_signals), 76 + sizeof(void *));
  ABI_EQ(offsetof(tpt_trainer_options, precision), 80 + sizeof(void *));
  ABI_EQ(offsetof(tpt_trainer_options, loss_scaling), 88 + sizeof(void *));
  ABI_EQ(offsetof(tpt_trainer_options, continue_stopped), 128 + sizeof(void *));
  ABI_EQ(sizeof(tpt_trainer_options), 136 + sizeof(void *));
  ABI_EQ(offsetof(tpt_loss_scaling, mode), 0);
  ABI_EQ(offsetof(tpt_loss_scaling, init_scale), 8);
  ABI_EQ(offsetof(tpt_loss_scaling, growth_factor), 16);
  ABI_EQ(offsetof(tpt_loss_scaling, backoff_factor), 24);
  ABI_EQ(offsetof(tpt_loss_scaling, growth_interval), 32);
  ABI_EQ(sizeof(tpt_loss_scaling), 40);
  ABI_EQ(TPT_LOSS_SCALING_AUTO, 0);
  ABI_EQ(TPT_LOSS_SCALING_ON, 1);
  ABI_EQ(TPT_LOSS_SCALING_OFF, 2);
  {
    tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
    ABI_EQ(o.version, TPT_TRAINER_OPTIONS_VERSION);
    ABI_EQ(o.is_chief, 1);
    ABI_EQ(o.starting_epoch, 1);
    ABI_EQ(o.max_epoch, 99999999);
    ABI_EQ(o.steps_per_epoch, -1);
    abi_check(o.logdir == NULL, "TPT_TRAINER_OPTIONS_INIT logdir is NULL");
    ABI_EQ(o.logdir_action, TPT_LOGDIR_REFUSE);
    ABI_EQ(o.progress, TPT_PROGRESS_AUTO);
    ABI_EQ(o.console, 1);
    ABI_EQ(o.default_callbacks, 1);
    ABI_EQ(o.default_monitors, 1);
    ABI_EQ(o.scalar_history, 1000);
    ABI_EQ(o.summary_period, 0);
    ABI_EQ(o.auto_resume, 0);
    ABI_EQ(o.stop_on_signals, 0);
    ABI_EQ(o.precision, TPT_PRECISION_FP32);
    ABI_EQ(o.loss_scaling.mode, TPT_LOSS_SCALING_AUTO);
    abi_check(o.loss_scaling.init_scale == 65536.0 && o.loss_scaling.growth_factor == 2.0 &&
                  o.loss_scaling.backoff_factor == 0.5,
              "TPT_LOSS_SCALING_INIT is GradScaler's defaults");
    ABI_EQ(o.loss_scaling.growth_interval, 2000);
    ABI_EQ(o.continue_stopped, 0);
  }
  /* tpt_callback_desc */
  ABI_EQ(TPT_CALLBACK_DESC_VERSION, 2);
  ABI_EQ(offsetof(tpt_callback_desc, version), 0);
  ABI_EQ(offsetof(tpt_callback_desc, events), 4);
  ABI_EQ(offsetof(tpt_callback_desc, name), 8);
  ABI_EQ(offsetof(tpt_callback_desc, chief_only), 8 + sizeof(void *));
  ABI_EQ(offsetof(tpt_callback_desc, fn), 8 + 2 * sizeof(void *));
  ABI_EQ(offsetof(tpt_callback_desc, user_data), 8 + 3 * sizeof(void *));
  ABI_EQ(offsetof(tpt_callback_desc, destroy), 8 + 4 * sizeof(void *));
  ABI_EQ(offsetof(tpt_callback_desc, save), 8 + 5 * sizeof(void *));
  ABI_EQ(offsetof(tpt_callback_desc, restore), 8 + 6 * sizeof(void *));
  ABI_EQ(sizeof(tpt_callback_desc), 8 + 7 * sizeof(void *));
  {
    tpt_callback_desc d = TPT_CALLBACK_DESC_INIT;
    ABI_EQ(d.version, TPT_CALLBACK_DESC_VERSION);
    ABI_EQ(d.events, 0);
    ABI_EQ(d.chief_only, 1);
    abi_check(d.name == NULL && d.fn == NULL && d.user_data == NULL && d.destroy == NULL && d.save == NULL &&
                  d.restore == NULL,
              "TPT_CALLBACK_DESC_INIT pointers are NULL");
  }
  /* tpt_model_saver_options */
  ABI_EQ(TPT_MODEL_SAVER_OPTIONS_VERSION, 1);
  ABI_EQ(offsetof(tpt_model_saver_options, max_to_keep), 4);
  ABI_EQ(offsetof(tpt_model_saver_options, keep_every_n_hours), 8);
  ABI_EQ(offsetof(tpt_model_saver_options, every_k_steps), 16);
  ABI_EQ(offsetof(tpt_model_saver_options, every_k_epochs), 24);
  ABI_EQ(offsetof(tpt_model_saver_options, dir), 32);
  ABI_EQ(sizeof(tpt_model_saver_options), 32 + sizeof(void *));
  {
    tpt_model_saver_options o = TPT_MODEL_SAVER_OPTIONS_INIT;
    ABI_EQ(o.max_to_keep, 10);
    abi_check(o.keep_every_n_hours == 0.5 && o.every_k_steps == 0 && o.every_k_epochs == 1 && o.dir == NULL,
              "TPT_MODEL_SAVER_OPTIONS_INIT defaults");
  }
  /* tpt_predictor_options */
  ABI_EQ(TPT_PREDICTOR_OPTIONS_VERSION, 1);
  ABI_EQ(offsetof(tpt_predictor_options, input_names), sizeof(void *));
  ABI_EQ(offsetof(tpt_predictor_options, n_input_names), 2 * sizeof(void *));
  ABI_EQ(offsetof(tpt_predictor_options, checkpoint), 3 * sizeof(void *));
  ABI_EQ(sizeof(tpt_predictor_options), 4 * sizeof(void *));
  {
    tpt_predictor_options o = TPT_PREDICTOR_OPTIONS_INIT;
    abi_check(o.version == TPT_PREDICTOR_OPTIONS_VERSION && o.input_names == NULL && o.n_input_names == 0 &&
                  o.checkpoint == NULL,
              "TPT_PREDICTOR_OPTIONS_INIT defaults");
  }
  /* tpt_restore_options */
  ABI_EQ(TPT_RESTORE_OPTIONS_VERSION, 1);
  ABI_EQ(offsetof(tpt_restore_options, ignore_missing), 4);
  ABI_EQ(offsetof(tpt_restore_options, ignore_unexpected), 8);
  ABI_EQ(offsetof(tpt_restore_options, ignore_shape_mismatch), 12);
  ABI_EQ(offsetof(tpt_restore_options, prefix), 16);
  ABI_EQ(offsetof(tpt_restore_options, name_map), 16 + sizeof(void *));
  ABI_EQ(offsetof(tpt_restore_options, n_name_map), 16 + 2 * sizeof(void *));
  ABI_EQ(sizeof(tpt_restore_options), 16 + 3 * sizeof(void *));
  {
    tpt_restore_options o = TPT_RESTORE_OPTIONS_INIT;
    abi_check(o.ignore_missing == 0 && o.ignore_unexpected == 1 && o.ignore_shape_mismatch == 0 && o.prefix == NULL &&
                  o.name_map == NULL && o.n_name_map == 0,
              "TPT_RESTORE_OPTIONS_INIT defaults");
  }
  /* inference and the catalogue's options */
  ABI_EQ(TPT_INFERENCER_DESC_VERSION, 1);
  ABI_EQ(offsetof(tpt_inferencer_desc, name), 8);
  ABI_EQ(offsetof(tpt_inferencer_desc, outputs), 8 + sizeof(void *));
  ABI_EQ(offsetof(tpt_inferencer_desc, n_outputs), 8 + 2 * sizeof(void *));
  ABI_EQ(offsetof(tpt_inferencer_desc, before), 8 + 3 * sizeof(void *));
  ABI_EQ(offsetof(tpt_inferencer_desc, on_outputs), 8 + 4 * sizeof(void *));
  ABI_EQ(offsetof(tpt_inferencer_desc, after), 8 + 5 * sizeof(void *));
  ABI_EQ(offsetof(tpt_inferencer_desc, user_data), 8 + 6 * sizeof(void *));
  ABI_EQ(offsetof(tpt_inferencer_desc, destroy), 8 + 7 * sizeof(void *));
  ABI_EQ(sizeof(tpt_inferencer_desc), 8 + 8 * sizeof(void *));
  ABI_EQ(TPT_STAT_MONITOR_OPTIONS_VERSION, 1);
  ABI_EQ(offsetof(tpt_stat_monitor_options, last_k), 8);
  ABI_EQ(offsetof(tpt_stat_monitor_options, threshold), 16);
  ABI_EQ(offsetof(tpt_stat_monitor_options, maximize), 24);
  ABI_EQ(offsetof(tpt_stat_monitor_options, factor), 32);
  ABI_EQ(offsetof(tpt_stat_monitor_options, limit), 40);
  ABI_EQ(sizeof(tpt_stat_monitor_options), 48);
  {
    tpt_stat_monitor_options o = TPT_STAT_MONITOR_OPTIONS_INIT;
    abi_check(o.last_k == 5 && o.threshold == 0 && o.maximize == 0 && o.factor == 0.1 && o.limit == 0,
              "TPT_STAT_MONITOR_OPTIONS_INIT defaults");
  }
  ABI_EQ(TPT_EARLY_STOPPING_OPTIONS_VERSION, 1);
  ABI_EQ(offsetof(tpt_early_stopping_options, patience), 8);
  ABI_EQ(offsetof(tpt_early_stopping_options, min_delta), 16);
  ABI_EQ(offsetof(tpt_early_stopping_options, maximize), 24);
  ABI_EQ(sizeof(tpt_early_stopping_options), 32);
  {
    tpt_early_stopping_options o = TPT_EARLY_STOPPING_OPTIONS_INIT;
    abi_check(o.patience == 3 && o.min_delta == 0 && o.maximize == 0, "TPT_EARLY_STOPPING_OPTIONS_INIT defaults");
  }
  /* tpt_record (filled by the library; struct_size first) */
  ABI_EQ(offsetof(tpt_record, struct_size), 0);
  ABI_EQ(offsetof(tpt_record, kind), 4);
  ABI_EQ(offsetof(tpt_record, name), 8);
  ABI_EQ(offsetof(tpt_record, global_step), 8 + sizeof(void *));
  ABI_EQ(offsetof(tpt_record, epoch_num), 16 + sizeof(void *));
  ABI_EQ(offsetof(tpt_record, value), 24 + sizeof(void *));
  ABI_EQ(offsetof(tpt_record, tensor), 32 + sizeof(void *));
  ABI_EQ(sizeof(tpt_record), 32 + 2 * sizeof(void *));
  /* operators */
  ABI_EQ(TPT_ARG_NONE, 0);
  ABI_EQ(TPT_ARG_TENSOR, 1);
  ABI_EQ(TPT_ARG_INT, 2);
  ABI_EQ(TPT_ARG_DOUBLE, 3);
  ABI_EQ(TPT_ARG_BOOL, 4);
  ABI_EQ(TPT_ARG_INT_LIST, 5);
  ABI_EQ(TPT_ARG_DOUBLE_LIST, 6);
  ABI_EQ(TPT_ARG_TENSOR_LIST, 7);
  ABI_EQ(TPT_ARG_STRING, 8);
  ABI_EQ(TPT_ARG_DTYPE, 9);
  ABI_EQ(offsetof(tpt_arg, kind), 0);
  ABI_EQ(offsetof(tpt_arg, name), 8);
  ABI_EQ(offsetof(tpt_arg, tensor), 8 + sizeof(void *));
  ABI_EQ(offsetof(tpt_arg, i), 8 + 2 * sizeof(void *));
  ABI_EQ(offsetof(tpt_arg, d), 16 + 2 * sizeof(void *));
  ABI_EQ(offsetof(tpt_arg, list), 24 + 2 * sizeof(void *));
  ABI_EQ(offsetof(tpt_arg, len), 24 + 3 * sizeof(void *));
  ABI_EQ(sizeof(tpt_arg), 24 + 3 * sizeof(void *) + sizeof(size_t));
  /* models */
  ABI_EQ(offsetof(tpt_input_spec, name), 0);
  ABI_EQ(offsetof(tpt_input_spec, dtype), sizeof(void *));
  ABI_EQ(offsetof(tpt_input_spec, shape), 2 * sizeof(void *));
  ABI_EQ(offsetof(tpt_input_spec, ndim), 3 * sizeof(void *));
  ABI_EQ(sizeof(tpt_input_spec), 3 * sizeof(void *) + sizeof(size_t));
  ABI_EQ(TPT_INIT_ZEROS, 1);
  ABI_EQ(TPT_INIT_CONSTANT, 2);
  ABI_EQ(TPT_INIT_UNIFORM, 3);
  ABI_EQ(TPT_INIT_NORMAL, 4);
  ABI_EQ(TPT_INIT_TRUNCATED_NORMAL, 5);
  ABI_EQ(TPT_INIT_GLOROT_UNIFORM, 6);
  ABI_EQ(TPT_INIT_GLOROT_NORMAL, 7);
  ABI_EQ(TPT_INIT_HE_UNIFORM, 8);
  ABI_EQ(TPT_INIT_HE_NORMAL, 9);
  ABI_EQ(TPT_VARIABLE_OPTIONS_VERSION, 1);
  ABI_EQ(offsetof(tpt_variable_options, version), 0);
  ABI_EQ(offsetof(tpt_variable_options, dtype), 4);
  ABI_EQ(offsetof(tpt_variable_options, init), 8);
  ABI_EQ(offsetof(tpt_variable_options, trainable), 12);
  ABI_EQ(offsetof(tpt_variable_options, a), 16);
  ABI_EQ(offsetof(tpt_variable_options, b), 24);
  ABI_EQ(sizeof(tpt_variable_options), 32);
  {
    tpt_variable_options v = TPT_VARIABLE_OPTIONS_INIT;
    ABI_EQ(v.dtype, TPT_DTYPE_F32);
    ABI_EQ(v.init, TPT_INIT_GLOROT_UNIFORM);
    ABI_EQ(v.trainable, 1);
  }
  ABI_EQ(offsetof(tpt_torchscript_param, name), 0);
  ABI_EQ(offsetof(tpt_torchscript_param, shape), sizeof(void *));
  ABI_EQ(offsetof(tpt_torchscript_param, ndim), 2 * sizeof(void *));
  ABI_EQ(offsetof(tpt_torchscript_param, options), 2 * sizeof(void *) + sizeof(size_t));
  ABI_EQ(sizeof(tpt_torchscript_param), 3 * sizeof(void *) + sizeof(size_t));
  /* layers */
  ABI_EQ(TPT_ACT_NONE, 0);
  ABI_EQ(TPT_ACT_RELU, 1);
  ABI_EQ(TPT_ACT_LEAKY_RELU, 2);
  ABI_EQ(TPT_ACT_SIGMOID, 3);
  ABI_EQ(TPT_ACT_TANH, 4);
  ABI_EQ(TPT_ACT_GELU, 5);
  ABI_EQ(TPT_ACT_SOFTMAX, 6);
  ABI_EQ(TPT_PADDING_SAME, 0);
  ABI_EQ(TPT_PADDING_VALID, 1);
  ABI_EQ(TPT_LAYER_OPTIONS_VERSION, 1);
  ABI_EQ(offsetof(tpt_layer_options, version), 0);
  ABI_EQ(offsetof(tpt_layer_options, use_bias), 4);
  ABI_EQ(offsetof(tpt_layer_options, activation), 8);
  ABI_EQ(offsetof(tpt_layer_options, alpha), 16);
  ABI_EQ(offsetof(tpt_layer_options, kernel_init), 24);
  ABI_EQ(offsetof(tpt_layer_options, bias_init), 28);
  ABI_EQ(offsetof(tpt_layer_options, kernel), 32);
  ABI_EQ(offsetof(tpt_layer_options, stride), 48);
  ABI_EQ(offsetof(tpt_layer_options, dilation), 64);
  ABI_EQ(offsetof(tpt_layer_options, groups), 80);
  ABI_EQ(offsetof(tpt_layer_options, padding), 88);
  ABI_EQ(sizeof(tpt_layer_options), 96);
  {
    tpt_layer_options l = TPT_LAYER_OPTIONS_INIT;
    ABI_EQ(l.use_bias, 1);
    ABI_EQ(l.kernel[0], 3);
    ABI_EQ(l.stride[1], 1);
    ABI_EQ(l.groups, 1);
    ABI_EQ(l.padding, TPT_PADDING_SAME);
    ABI_EQ(l.kernel_init, TPT_INIT_HE_NORMAL);
  }
  /* TrainConfig */
  ABI_EQ(TPT_TRAIN_CONFIG_VERSION, 5);
  ABI_EQ(offsetof(tpt_train_config, version), 0);
  ABI_EQ(offsetof(tpt_train_config, options), 8);
  ABI_EQ(offsetof(tpt_train_config, model), 8 + sizeof(void *));
  ABI_EQ(offsetof(tpt_train_config, input), 8 + 2 * sizeof(void *));
  ABI_EQ(offsetof(tpt_train_config, callbacks), 8 + 3 * sizeof(void *));
  ABI_EQ(offsetof(tpt_train_config, n_callbacks), 8 + 4 * sizeof(void *));
  ABI_EQ(offsetof(tpt_train_config, monitors), 8 + 4 * sizeof(void *) + sizeof(size_t));
  ABI_EQ(offsetof(tpt_train_config, n_monitors), 8 + 5 * sizeof(void *) + sizeof(size_t));
  ABI_EQ(offsetof(tpt_train_config, init), 8 + 5 * sizeof(void *) + 2 * sizeof(size_t));
  ABI_EQ(offsetof(tpt_train_config, init_user_data), 8 + 6 * sizeof(void *) + 2 * sizeof(size_t));
  ABI_EQ(offsetof(tpt_train_config, dataflow), 8 + 7 * sizeof(void *) + 2 * sizeof(size_t));
  ABI_EQ(offsetof(tpt_train_config, towers), 8 + 8 * sizeof(void *) + 2 * sizeof(size_t));
  ABI_EQ(offsetof(tpt_train_config, distributed), 8 + 9 * sizeof(void *) + 2 * sizeof(size_t));
  ABI_EQ(offsetof(tpt_train_config, input_options), 8 + 10 * sizeof(void *) + 2 * sizeof(size_t));
  ABI_EQ(sizeof(tpt_train_config), 8 + 11 * sizeof(void *) + 2 * sizeof(size_t));
  /* towers */
  ABI_EQ(TPT_STRATEGY_SIMPLE, 0);
  ABI_EQ(TPT_STRATEGY_REPLICATED, 1);
  ABI_EQ(TPT_STRATEGY_PARAMETER_SERVER, 2);
  ABI_EQ(TPT_STRATEGY_ASYNC, 3);
  ABI_EQ(TPT_TOWERS_OPTIONS_VERSION, 3);
  ABI_EQ(offsetof(tpt_towers_options, strategy), 4);
  ABI_EQ(offsetof(tpt_towers_options, n_towers), 8);
  ABI_EQ(offsetof(tpt_towers_options, devices), 16);
  ABI_EQ(offsetof(tpt_towers_options, average), 16 + sizeof(void *));
  ABI_EQ(offsetof(tpt_towers_options, intra_op_threads), 20 + sizeof(void *));
  ABI_EQ(offsetof(tpt_towers_options, overlap), 24 + sizeof(void *));
  ABI_EQ(offsetof(tpt_towers_options, bucket_bytes), 24 + sizeof(void *) + sizeof(size_t));
  ABI_EQ(offsetof(tpt_towers_options, average_scalars), 24 + sizeof(void *) + 2 * sizeof(size_t));
  ABI_EQ(sizeof(tpt_towers_options), 24 + sizeof(void *) + 3 * sizeof(size_t));
  {
    tpt_towers_options o = TPT_TOWERS_OPTIONS_INIT;
    abi_check(o.strategy == TPT_STRATEGY_REPLICATED && o.n_towers == 2 && o.devices == NULL && o.average == 1 &&
                  o.intra_op_threads == 0 && o.overlap == 1 && o.bucket_bytes == 0 && o.average_scalars == 0,
              "TPT_TOWERS_OPTIONS_INIT defaults");
  }
  /* distributed */
  ABI_EQ(TPT_DISTRIBUTED_OPTIONS_VERSION, 1);
  ABI_EQ(offsetof(tpt_distributed_options, master_addr), 8);
  ABI_EQ(offsetof(tpt_distributed_options, master_port), 8 + sizeof(void *));
  ABI_EQ(offsetof(tpt_distributed_options, world_size), 12 + sizeof(void *));
  ABI_EQ(offsetof(tpt_distributed_options, rank), 16 + sizeof(void *));
  ABI_EQ(offsetof(tpt_distributed_options, local_rank), 20 + sizeof(void *));
  ABI_EQ(offsetof(tpt_distributed_options, timeout_ms), 24 + sizeof(void *));
  ABI_EQ(offsetof(tpt_distributed_options, shard), 32 + sizeof(void *));
  ABI_EQ(offsetof(tpt_distributed_options, average_scalars), 36 + sizeof(void *));
  ABI_EQ(sizeof(tpt_distributed_options), 40 + sizeof(void *));
  {
    tpt_distributed_options o = TPT_DISTRIBUTED_OPTIONS_INIT;
    abi_check(o.master_addr == NULL && o.master_port == 0 && o.world_size == 0 && o.rank == 0 && o.local_rank == 0 &&
                  o.timeout_ms == 0 && o.shard == 1 && o.average_scalars == 0,
              "TPT_DISTRIBUTED_OPTIONS_INIT defaults");
  }
  /* train ops and the GAN trainers */
  ABI_EQ(TPT_TRAIN_OP_VERSION, 1);
  ABI_EQ(offsetof(tpt_train_op, name), 8);
  ABI_EQ(offsetof(tpt_train_op, cost), 8 + sizeof(void *));
  ABI_EQ(offsetof(tpt_train_op, scope), 8 + 2 * sizeof(void *));
  ABI_EQ(offsetof(tpt_train_op, optimizer), 8 + 3 * sizeof(void *));
  ABI_EQ(sizeof(tpt_train_op), 8 + 4 * sizeof(void *));
  ABI_EQ(TPT_GAN_OPTIONS_VERSION, 2);
  ABI_EQ(offsetof(tpt_gan_options, separate), 4);
  ABI_EQ(offsetof(tpt_gan_options, d_period), 8);
  ABI_EQ(offsetof(tpt_gan_options, g_period), 16);
  ABI_EQ(offsetof(tpt_gan_options, g_op), 24);
  ABI_EQ(offsetof(tpt_gan_options, d_op), 24 + sizeof(void *));
  ABI_EQ(offsetof(tpt_gan_options, towers), 24 + 2 * sizeof(void *)); /* version 2 */
  ABI_EQ(sizeof(tpt_gan_options), 24 + 3 * sizeof(void *));
  {
    tpt_gan_options o = TPT_GAN_OPTIONS_INIT;
    abi_check(o.separate == 0 && o.d_period == 1 && o.g_period == 1 && o.g_op == NULL && o.d_op == NULL &&
                  o.towers == NULL,
              "TPT_GAN_OPTIONS_INIT defaults");
  }
  /* images */
  ABI_EQ(TPT_IMAGE_GRID_OPTIONS_VERSION, 1);
  ABI_EQ(offsetof(tpt_image_grid_options, columns), 4);
  ABI_EQ(offsetof(tpt_image_grid_options, padding), 8);
  ABI_EQ(offsetof(tpt_image_grid_options, low), 16);
  ABI_EQ(offsetof(tpt_image_grid_options, high), 24);
  ABI_EQ(offsetof(tpt_image_grid_options, pad_value), 32);
  ABI_EQ(sizeof(tpt_image_grid_options), 40);
  {
    tpt_image_grid_options o = TPT_IMAGE_GRID_OPTIONS_INIT;
    abi_check(o.columns == 8 && o.padding == 2 && o.low == 0 && o.high == 0 && o.pad_value == 0,
              "TPT_IMAGE_GRID_OPTIONS_INIT defaults");
  }
  /* Dataflows */
  ABI_EQ(TPT_DATAFLOW_CALLBACKS_VERSION, 2);
  ABI_EQ(offsetof(tpt_dataflow_callbacks, version), 0);
  ABI_EQ(offsetof(tpt_dataflow_callbacks, next), 8);
  ABI_EQ(offsetof(tpt_dataflow_callbacks, reset), 8 + sizeof(void *));
  ABI_EQ(offsetof(tpt_dataflow_callbacks, size), 8 + 2 * sizeof(void *));
  ABI_EQ(offsetof(tpt_dataflow_callbacks, save), 8 + 3 * sizeof(void *));
  ABI_EQ(offsetof(tpt_dataflow_callbacks, restore), 8 + 4 * sizeof(void *));
  ABI_EQ(sizeof(tpt_dataflow_callbacks), 8 + 5 * sizeof(void *));
  ABI_EQ(TPT_PARALLEL_MAP_OPTIONS_VERSION, 1);
  ABI_EQ(offsetof(tpt_parallel_map_options, n_threads), 4);
  ABI_EQ(offsetof(tpt_parallel_map_options, buffer_size), 8);
  ABI_EQ(offsetof(tpt_parallel_map_options, ordered), 12);
  ABI_EQ(offsetof(tpt_parallel_map_options, strict), 16);
  ABI_EQ(sizeof(tpt_parallel_map_options), 20);
  {
    tpt_parallel_map_options o = TPT_PARALLEL_MAP_OPTIONS_INIT;
    ABI_EQ(o.n_threads, 2);
    ABI_EQ(o.buffer_size, 200);
    ABI_EQ(o.ordered, 0);
    ABI_EQ(o.strict, 0);
  }
  ABI_EQ(TPT_AUGMENT_TO_FLOAT, 1);
  ABI_EQ(TPT_AUGMENT_FLIP, 4);
  ABI_EQ(TPT_AUGMENTOR_VERSION, 1);
  ABI_EQ(offsetof(tpt_augmentor, version), 0);
  ABI_EQ(offsetof(tpt_augmentor, kind), 4);
  ABI_EQ(offsetof(tpt_augmentor, scale), 8);
  ABI_EQ(offsetof(tpt_augmentor, mean), 16);
  ABI_EQ(offsetof(tpt_augmentor, std), 16 + sizeof(void *));
  ABI_EQ(offsetof(tpt_augmentor, n_channels), 16 + 2 * sizeof(void *));
  ABI_EQ(offsetof(tpt_augmentor, height), 16 + 2 * sizeof(void *) + sizeof(size_t));
  ABI_EQ(offsetof(tpt_augmentor, width), 24 + 2 * sizeof(void *) + sizeof(size_t));
  ABI_EQ(offsetof(tpt_augmentor, padding), 32 + 2 * sizeof(void *) + sizeof(size_t));
  ABI_EQ(offsetof(tpt_augmentor, probability), 40 + 2 * sizeof(void *) + sizeof(size_t));
  ABI_EQ(sizeof(tpt_augmentor), 48 + 2 * sizeof(void *) + sizeof(size_t));
  {
    tpt_augmentor a = TPT_AUGMENTOR_INIT;
    abi_check(a.version == TPT_AUGMENTOR_VERSION && a.kind == TPT_AUGMENT_TO_FLOAT && a.scale == 1.0 && a.mean == NULL &&
                  a.std == NULL && a.n_channels == 0 && a.height == 0 && a.width == 0 && a.padding == 0 &&
                  a.probability == 0.5,
              "TPT_AUGMENTOR_INIT defaults");
  }
  /* Inputs */
  ABI_EQ(TPT_INPUT_QUEUE, 1);
  ABI_EQ(TPT_INPUT_FEED, 2);
  ABI_EQ(TPT_INPUT_OPTIONS_VERSION, 1);
  ABI_EQ(offsetof(tpt_input_options, kind), 4);
  ABI_EQ(offsetof(tpt_input_options, capacity), 8);
  ABI_EQ(offsetof(tpt_input_options, repeat), 16);
  ABI_EQ(sizeof(tpt_input_options), 24);
  {
    tpt_input_options o = TPT_INPUT_OPTIONS_INIT;
    ABI_EQ(o.kind, TPT_INPUT_QUEUE);
    ABI_EQ(o.capacity, 50);
    ABI_EQ(o.repeat, 1);
  }
  /* header and library agree */
  ABI_EQ(tpt_version(), TPT_VERSION_NUMBER);
  ABI_EQ(tpt_abi_version(), TPT_ABI_VERSION);
  abi_check(strcmp(tpt_version_string(), TPT_VERSION_STRING) == 0, "version string");
  printf("1..%d\n", abi_n);
  return abi_failed;
}
