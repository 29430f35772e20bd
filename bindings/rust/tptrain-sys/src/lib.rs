//! Raw declarations of `include/tptrain.h`, written by hand and kept in the
//! header's order. Enums are plain integers with constants (a C enum value the
//! Rust side does not know must not be undefined behaviour). The safe API is
//! the `tptrain` crate.
#![allow(non_camel_case_types)]

use std::os::raw::{c_char, c_int, c_void};

// ---- Versions
pub const TPT_VERSION_MAJOR: u32 = 0;
pub const TPT_VERSION_MINOR: u32 = 1;
pub const TPT_VERSION_PATCH: u32 = 0;
pub const TPT_VERSION_NUMBER: u32 = TPT_VERSION_MAJOR * 10000 + TPT_VERSION_MINOR * 100 + TPT_VERSION_PATCH;
pub const TPT_ABI_VERSION: u32 = 0;

// ---- Status
pub type tpt_code = c_int;
pub const TPT_OK: tpt_code = 0;
pub const TPT_ERR_INVALID_ARGUMENT: tpt_code = 1;
pub const TPT_ERR_OUT_OF_MEMORY: tpt_code = 2;
pub const TPT_ERR_BACKEND: tpt_code = 3;
pub const TPT_ERR_INTERNAL: tpt_code = 4;
pub const TPT_ERR_UNKNOWN: tpt_code = 5;
pub const TPT_ERR_CALLBACK: tpt_code = 6;
pub const TPT_ERR_IO: tpt_code = 7;
pub const TPT_ERR_STATE: tpt_code = 8;
pub const TPT_ERR_UNSUPPORTED: tpt_code = 9;
pub const TPT_ERR_NOT_FOUND: tpt_code = 10;
/// Something took longer than its time limit (a step under
/// `tpt_callback_step_watchdog`).
pub const TPT_ERR_TIMEOUT: tpt_code = 11;
/// Not an error: returned (as `tpt_status_new(TPT_STOP, reason)`) by a callback
/// or a run_step to end training gracefully.
pub const TPT_STOP: tpt_code = 100;

/// Opaque (`tpt_status`).
#[repr(C)]
pub struct tpt_status {
    _private: [u8; 0],
}

// ---- Runtime
pub type tpt_feature = c_int;
pub const TPT_FEATURE_GLOO: tpt_feature = 1;
pub const TPT_FEATURE_CUDA: tpt_feature = 2;
pub const TPT_FEATURE_NCCL: tpt_feature = 3;
pub type tpt_float32_precision = c_int;
pub const TPT_FLOAT32_DEFAULT: tpt_float32_precision = 0;
pub const TPT_FLOAT32_IEEE: tpt_float32_precision = 1;
pub const TPT_FLOAT32_TF32: tpt_float32_precision = 2;
pub type tpt_determinism = c_int;
pub const TPT_DETERMINISM_DEFAULT: tpt_determinism = 0;
pub const TPT_DETERMINISM_WARN: tpt_determinism = 1;
pub const TPT_DETERMINISM_ON: tpt_determinism = 2;

// ---- Tensors
pub type tpt_dtype = c_int;
pub const TPT_DTYPE_F32: tpt_dtype = 1;
pub const TPT_DTYPE_F64: tpt_dtype = 2;
pub const TPT_DTYPE_F16: tpt_dtype = 3;
pub const TPT_DTYPE_BF16: tpt_dtype = 4;
pub const TPT_DTYPE_I64: tpt_dtype = 5;
pub const TPT_DTYPE_I32: tpt_dtype = 6;
pub const TPT_DTYPE_U8: tpt_dtype = 7;
pub const TPT_DTYPE_BOOL: tpt_dtype = 8;

pub const TPT_TENSOR_OPTIONS_VERSION: u32 = 1;
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tpt_tensor_options {
    pub version: u32,
    pub dtype: tpt_dtype,
    pub device: *const c_char,
    pub requires_grad: i32,
}
/// `TPT_TENSOR_OPTIONS_INIT`
pub const TPT_TENSOR_OPTIONS_INIT: tpt_tensor_options = tpt_tensor_options {
    version: TPT_TENSOR_OPTIONS_VERSION,
    dtype: TPT_DTYPE_F32,
    device: std::ptr::null(),
    requires_grad: 0,
};

/// Opaque (`tpt_tensor`).
#[repr(C)]
pub struct tpt_tensor {
    _private: [u8; 0],
}

/// `void (*deleter)(void *data, void *deleter_ctx)` of `tpt_tensor_from_blob`.
pub type tpt_blob_deleter_fn = Option<unsafe extern "C" fn(data: *mut c_void, deleter_ctx: *mut c_void)>;

/// Opaque here (`struct DLManagedTensor` of dlpack.h, DLPACK_VERSION 0.6).
#[repr(C)]
pub struct DLManagedTensor {
    _private: [u8; 0],
}

// ---- Operators
pub type tpt_arg_kind = c_int;
pub const TPT_ARG_NONE: tpt_arg_kind = 0;
pub const TPT_ARG_TENSOR: tpt_arg_kind = 1;
pub const TPT_ARG_INT: tpt_arg_kind = 2;
pub const TPT_ARG_DOUBLE: tpt_arg_kind = 3;
pub const TPT_ARG_BOOL: tpt_arg_kind = 4;
pub const TPT_ARG_INT_LIST: tpt_arg_kind = 5;
pub const TPT_ARG_DOUBLE_LIST: tpt_arg_kind = 6;
pub const TPT_ARG_TENSOR_LIST: tpt_arg_kind = 7;
pub const TPT_ARG_STRING: tpt_arg_kind = 8;
pub const TPT_ARG_DTYPE: tpt_arg_kind = 9;

/// One operator argument; only the fields of its kind are read. Borrowed for
/// the call.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tpt_arg {
    pub kind: tpt_arg_kind,
    /// NULL: positional; else the schema's argument name.
    pub name: *const c_char,
    pub tensor: *const tpt_tensor,
    pub i: i64,
    pub d: f64,
    /// Lists (`const int64_t *`, `const double *`, `const tpt_tensor *const *`)
    /// and strings (`const char *`).
    pub list: *const c_void,
    pub len: usize,
}
/// An all-zero `tpt_arg` (a positional `TPT_ARG_NONE`), to fill in.
pub const TPT_ARG_ZERO: tpt_arg = tpt_arg {
    kind: TPT_ARG_NONE,
    name: std::ptr::null(),
    tensor: std::ptr::null(),
    i: 0,
    d: 0.0,
    list: std::ptr::null(),
    len: 0,
};

// ---- Trainer
/// Opaque (`tpt_trainer`).
#[repr(C)]
pub struct tpt_trainer {
    _private: [u8; 0],
}

pub type tpt_logdir_action = c_int;
pub const TPT_LOGDIR_REFUSE: tpt_logdir_action = 0;
pub const TPT_LOGDIR_KEEP: tpt_logdir_action = 1;
pub const TPT_LOGDIR_DELETE: tpt_logdir_action = 2;
pub const TPT_LOGDIR_BACKUP: tpt_logdir_action = 3;
pub const TPT_LOGDIR_NEW: tpt_logdir_action = 4;
pub const TPT_LOGDIR_ASK: tpt_logdir_action = 5;

pub type tpt_scope_mode = c_int;
pub const TPT_SCOPE_FREE: tpt_scope_mode = 0;
pub const TPT_SCOPE_EXPIRE: tpt_scope_mode = 1;
pub const TPT_SCOPE_OFF: tpt_scope_mode = 2;

pub type tpt_progress = c_int;
pub const TPT_PROGRESS_AUTO: tpt_progress = 0;
pub const TPT_PROGRESS_BAR: tpt_progress = 1;
pub const TPT_PROGRESS_LINES: tpt_progress = 2;
pub const TPT_PROGRESS_OFF: tpt_progress = 3;

pub type tpt_precision = c_int;
pub const TPT_PRECISION_FP32: tpt_precision = 0;
pub const TPT_PRECISION_BF16_MIXED: tpt_precision = 1;
pub const TPT_PRECISION_FP16_MIXED: tpt_precision = 2;

pub type tpt_loss_scaling_mode = c_int;
pub const TPT_LOSS_SCALING_AUTO: tpt_loss_scaling_mode = 0;
pub const TPT_LOSS_SCALING_ON: tpt_loss_scaling_mode = 1;
pub const TPT_LOSS_SCALING_OFF: tpt_loss_scaling_mode = 2;

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tpt_loss_scaling {
    pub mode: tpt_loss_scaling_mode,
    pub init_scale: f64,
    pub growth_factor: f64,
    pub backoff_factor: f64,
    pub growth_interval: i64,
}
/// `TPT_LOSS_SCALING_INIT`
pub const TPT_LOSS_SCALING_INIT: tpt_loss_scaling = tpt_loss_scaling {
    mode: TPT_LOSS_SCALING_AUTO,
    init_scale: 65536.0,
    growth_factor: 2.0,
    backoff_factor: 0.5,
    growth_interval: 2000,
};

pub const TPT_TRAINER_OPTIONS_VERSION: u32 = 7;
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tpt_trainer_options {
    pub version: u32,
    pub is_chief: i32,
    pub starting_epoch: i64,
    pub max_epoch: i64,
    pub steps_per_epoch: i64,
    pub logdir: *const c_char,
    pub logdir_action: tpt_logdir_action,
    pub progress: tpt_progress,
    pub console: i32,
    pub default_callbacks: i32,
    pub default_monitors: i32,
    // version 2
    pub scalar_history: i64,
    pub summary_period: i64,
    // version 3
    pub auto_resume: i32,
    // version 4
    pub stop_on_signals: i32,
    // version 5
    pub precision: tpt_precision,
    // version 6
    pub loss_scaling: tpt_loss_scaling,
    // version 7
    pub continue_stopped: i32,
}
/// `TPT_TRAINER_OPTIONS_INIT`
pub const TPT_TRAINER_OPTIONS_INIT: tpt_trainer_options = tpt_trainer_options {
    version: TPT_TRAINER_OPTIONS_VERSION,
    is_chief: 1,
    starting_epoch: 1,
    max_epoch: 99999999,
    steps_per_epoch: -1,
    logdir: std::ptr::null(),
    logdir_action: TPT_LOGDIR_REFUSE,
    progress: TPT_PROGRESS_AUTO,
    console: 1,
    default_callbacks: 1,
    default_monitors: 1,
    scalar_history: 1000,
    summary_period: 0,
    auto_resume: 0,
    stop_on_signals: 0,
    precision: TPT_PRECISION_FP32,
    loss_scaling: TPT_LOSS_SCALING_INIT,
    continue_stopped: 0,
};

/// `tpt_run_step_fn`
pub type tpt_run_step_fn =
    Option<unsafe extern "C" fn(trainer: *mut tpt_trainer, user_data: *mut c_void) -> *mut tpt_status>;
/// `tpt_step_fn`
pub type tpt_step_fn =
    Option<unsafe extern "C" fn(trainer: *mut tpt_trainer, user_data: *mut c_void) -> *mut tpt_status>;
/// The `void (*destroy)(void *user_data)` parameters and fields (no typedef in C).
pub type tpt_destroy_fn = Option<unsafe extern "C" fn(user_data: *mut c_void)>;

// ---- Callbacks
pub type tpt_event = c_int;
pub const TPT_EVENT_SETUP: tpt_event = 1 << 0;
pub const TPT_EVENT_BEFORE_TRAIN: tpt_event = 1 << 1;
pub const TPT_EVENT_BEFORE_EPOCH: tpt_event = 1 << 2;
pub const TPT_EVENT_BEFORE_RUN: tpt_event = 1 << 3;
pub const TPT_EVENT_AFTER_RUN: tpt_event = 1 << 4;
pub const TPT_EVENT_TRIGGER_STEP: tpt_event = 1 << 5;
pub const TPT_EVENT_AFTER_EPOCH: tpt_event = 1 << 6;
pub const TPT_EVENT_TRIGGER_EPOCH: tpt_event = 1 << 7;
pub const TPT_EVENT_TRIGGER: tpt_event = 1 << 8;
pub const TPT_EVENT_AFTER_TRAIN: tpt_event = 1 << 9;
pub const TPT_EVENT_RECORD: tpt_event = 1 << 10;
pub const TPT_EVENT_ALL: tpt_event = (1 << 11) - 1;

pub type tpt_record_kind = c_int;
pub const TPT_RECORD_SCALAR: tpt_record_kind = 1;
/// `tensor`: uint8, N x H x W x C (C = 1, 3 or 4); `value` unused.
pub const TPT_RECORD_IMAGE: tpt_record_kind = 2;

/// Borrowed during a callback only. Fields past `struct_size` do not exist.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tpt_record {
    pub struct_size: u32,
    pub kind: tpt_record_kind,
    pub name: *const c_char,
    pub global_step: i64,
    pub epoch_num: i64,
    pub value: f64,
    pub tensor: *const tpt_tensor,
}

/// `tpt_callback_fn`
pub type tpt_callback_fn = Option<
    unsafe extern "C" fn(
        trainer: *mut tpt_trainer,
        event: tpt_event,
        record: *const tpt_record,
        user_data: *mut c_void,
    ) -> *mut tpt_status,
>;

pub const TPT_CALLBACK_DESC_VERSION: u32 = 2;
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tpt_callback_desc {
    pub version: u32,
    /// A mask of `tpt_event` values.
    pub events: u32,
    pub name: *const c_char,
    pub chief_only: i32,
    /// `fn` in C (a keyword in Rust).
    pub fn_: tpt_callback_fn,
    pub user_data: *mut c_void,
    pub destroy: tpt_destroy_fn,
    /// Version 2: the callback's own state in checkpoints (both or neither).
    pub save: Option<unsafe extern "C" fn(out: *mut *mut tpt_tensor, user_data: *mut c_void) -> *mut tpt_status>,
    pub restore: Option<unsafe extern "C" fn(state: *const tpt_tensor, user_data: *mut c_void) -> *mut tpt_status>,
}
/// `TPT_CALLBACK_DESC_INIT`
pub const TPT_CALLBACK_DESC_INIT: tpt_callback_desc = tpt_callback_desc {
    version: TPT_CALLBACK_DESC_VERSION,
    events: 0,
    name: std::ptr::null(),
    chief_only: 1,
    fn_: None,
    user_data: std::ptr::null_mut(),
    destroy: None,
    save: None,
    restore: None,
};

/// Opaque (`tpt_callback`).
#[repr(C)]
pub struct tpt_callback {
    _private: [u8; 0],
}

/// Opaque (`tpt_inferencer`): one of an inference runner's inferencers.
#[repr(C)]
pub struct tpt_inferencer {
    _private: [u8; 0],
}

/// Opaque (`tpt_predictor`): tensorpack's OfflinePredictor.
#[repr(C)]
pub struct tpt_predictor {
    _private: [u8; 0],
}

pub const TPT_PREDICTOR_OPTIONS_VERSION: u32 = 1;
/// Options of `tpt_predictor_new` (`tpt_predictor_options`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tpt_predictor_options {
    pub version: u32,
    pub input_names: *const *const c_char,
    pub n_input_names: usize,
    pub checkpoint: *const c_char,
}
/// `TPT_PREDICTOR_OPTIONS_INIT`
pub const TPT_PREDICTOR_OPTIONS_INIT: tpt_predictor_options = tpt_predictor_options {
    version: TPT_PREDICTOR_OPTIONS_VERSION,
    input_names: std::ptr::null(),
    n_input_names: 0,
    checkpoint: std::ptr::null(),
};

pub const TPT_INFERENCER_DESC_VERSION: u32 = 1;
/// An inferencer written by the host (`tpt_inferencer_desc`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tpt_inferencer_desc {
    pub version: u32,
    /// For errors; copied; NULL: "inferencer".
    pub name: *const c_char,
    /// The tower's outputs it needs; copied.
    pub outputs: *const *const c_char,
    pub n_outputs: usize,
    /// May be NULL.
    pub before: Option<unsafe extern "C" fn(user_data: *mut c_void) -> *mut tpt_status>,
    /// Required: once per batch, with borrowed tensors in `outputs` order.
    pub on_outputs: Option<
        unsafe extern "C" fn(
            outputs: *const *const tpt_tensor,
            n_outputs: usize,
            rows: i64,
            user_data: *mut c_void,
        ) -> *mut tpt_status,
    >,
    /// May be NULL; puts its results with `tpt_trainer_put_scalar`.
    pub after: Option<unsafe extern "C" fn(trainer: *mut tpt_trainer, user_data: *mut c_void) -> *mut tpt_status>,
    pub user_data: *mut c_void,
    /// Called exactly once; may be NULL.
    pub destroy: tpt_destroy_fn,
}
/// `TPT_INFERENCER_DESC_INIT`
pub const TPT_INFERENCER_DESC_INIT: tpt_inferencer_desc = tpt_inferencer_desc {
    version: TPT_INFERENCER_DESC_VERSION,
    name: std::ptr::null(),
    outputs: std::ptr::null(),
    n_outputs: 0,
    before: None,
    on_outputs: None,
    after: None,
    user_data: std::ptr::null_mut(),
    destroy: None,
};

pub const TPT_IMAGE_GRID_OPTIONS_VERSION: u32 = 1;
/// Options of `tpt_image_grid` (torchvision's make_grid).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tpt_image_grid_options {
    pub version: u32,
    /// Images per row, >= 1.
    pub columns: i32,
    /// Pixels between the images and around them, >= 0.
    pub padding: i32,
    /// The values drawn black and white (linear between, clamped); `low ==
    /// high`: the images' own minimum and maximum.
    pub low: f64,
    pub high: f64,
    /// The padding's grey level in [0, 255].
    pub pad_value: f64,
}
/// `TPT_IMAGE_GRID_OPTIONS_INIT`
pub const TPT_IMAGE_GRID_OPTIONS_INIT: tpt_image_grid_options = tpt_image_grid_options {
    version: TPT_IMAGE_GRID_OPTIONS_VERSION,
    columns: 8,
    padding: 2,
    low: 0.0,
    high: 0.0,
    pad_value: 0.0,
};

/// `tpt_predicate_fn`: 1 enables, 0 disables, negative fails training.
pub type tpt_predicate_fn = Option<unsafe extern "C" fn(trainer: *mut tpt_trainer, user_data: *mut c_void) -> i32>;

// ---- Models
/// Opaque (`tpt_model`).
#[repr(C)]
pub struct tpt_model {
    _private: [u8; 0],
}
/// Opaque (`tpt_tower`), borrowed during one tower function call.
#[repr(C)]
pub struct tpt_tower {
    _private: [u8; 0],
}

/// `tpt_tower_fn`
pub type tpt_tower_fn = Option<
    unsafe extern "C" fn(
        tower: *mut tpt_tower,
        inputs: *const *const tpt_tensor,
        n_inputs: usize,
        user_data: *mut c_void,
    ) -> *mut tpt_status,
>;

/// One input of a model's signature; shape entries are >= 1 or -1.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tpt_input_spec {
    pub name: *const c_char,
    pub dtype: tpt_dtype,
    pub shape: *const i64,
    pub ndim: usize,
}

pub type tpt_init = c_int;
pub const TPT_INIT_ZEROS: tpt_init = 1;
pub const TPT_INIT_CONSTANT: tpt_init = 2;
pub const TPT_INIT_UNIFORM: tpt_init = 3;
pub const TPT_INIT_NORMAL: tpt_init = 4;
pub const TPT_INIT_TRUNCATED_NORMAL: tpt_init = 5;
pub const TPT_INIT_GLOROT_UNIFORM: tpt_init = 6;
pub const TPT_INIT_GLOROT_NORMAL: tpt_init = 7;
pub const TPT_INIT_HE_UNIFORM: tpt_init = 8;
pub const TPT_INIT_HE_NORMAL: tpt_init = 9;

pub const TPT_VARIABLE_OPTIONS_VERSION: u32 = 1;
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tpt_variable_options {
    pub version: u32,
    pub dtype: tpt_dtype,
    pub init: tpt_init,
    pub trainable: i32,
    pub a: f64,
    pub b: f64,
}
/// `TPT_VARIABLE_OPTIONS_INIT`
pub const TPT_VARIABLE_OPTIONS_INIT: tpt_variable_options = tpt_variable_options {
    version: TPT_VARIABLE_OPTIONS_VERSION,
    dtype: TPT_DTYPE_F32,
    init: TPT_INIT_GLOROT_UNIFORM,
    trainable: 1,
    a: 0.0,
    b: 0.0,
};

/// An attribute of a module compiled from TorchScript source.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tpt_torchscript_param {
    pub name: *const c_char,
    pub shape: *const i64,
    pub ndim: usize,
    pub options: *const tpt_variable_options,
}

// ---- Layers, losses and metrics
pub type tpt_activation = c_int;
pub const TPT_ACT_NONE: tpt_activation = 0;
pub const TPT_ACT_RELU: tpt_activation = 1;
pub const TPT_ACT_LEAKY_RELU: tpt_activation = 2;
pub const TPT_ACT_SIGMOID: tpt_activation = 3;
pub const TPT_ACT_TANH: tpt_activation = 4;
pub const TPT_ACT_GELU: tpt_activation = 5;
pub const TPT_ACT_SOFTMAX: tpt_activation = 6;

pub type tpt_padding = c_int;
pub const TPT_PADDING_SAME: tpt_padding = 0;
pub const TPT_PADDING_VALID: tpt_padding = 1;

pub const TPT_LAYER_OPTIONS_VERSION: u32 = 1;
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tpt_layer_options {
    pub version: u32,
    pub use_bias: i32,
    pub activation: tpt_activation,
    pub alpha: f64,
    pub kernel_init: tpt_init,
    pub bias_init: tpt_init,
    pub kernel: [i64; 2],
    pub stride: [i64; 2],
    pub dilation: [i64; 2],
    pub groups: i64,
    pub padding: tpt_padding,
}
/// `TPT_LAYER_OPTIONS_INIT`
pub const TPT_LAYER_OPTIONS_INIT: tpt_layer_options = tpt_layer_options {
    version: TPT_LAYER_OPTIONS_VERSION,
    use_bias: 1,
    activation: TPT_ACT_NONE,
    alpha: 0.2,
    kernel_init: TPT_INIT_HE_NORMAL,
    bias_init: TPT_INIT_ZEROS,
    kernel: [3, 3],
    stride: [1, 1],
    dilation: [1, 1],
    groups: 1,
    padding: TPT_PADDING_SAME,
};

// ---- Optimizers
/// Opaque (`tpt_optimizer`), reference-counted by the library.
#[repr(C)]
pub struct tpt_optimizer {
    _private: [u8; 0],
}

// ---- Dataflows: the input pipeline
/// Opaque (`tpt_dataflow`), reference-counted by the library.
#[repr(C)]
pub struct tpt_dataflow {
    _private: [u8; 0],
}
/// Opaque (`tpt_datapoint`).
#[repr(C)]
pub struct tpt_datapoint {
    _private: [u8; 0],
}

pub const TPT_DATAFLOW_CALLBACKS_VERSION: u32 = 2;
/// The functions of a dataflow made by `tpt_dataflow_from_callbacks`.
/// Version 2 adds `save` and `restore` (both or neither).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tpt_dataflow_callbacks {
    pub version: u32,
    /// Fills `dp` (empty on entry), or returns `TPT_STOP` at the end of the pass.
    pub next: Option<unsafe extern "C" fn(dp: *mut tpt_datapoint, user_data: *mut c_void) -> *mut tpt_status>,
    /// May be None.
    pub reset: Option<unsafe extern "C" fn(seed: u64, user_data: *mut c_void) -> *mut tpt_status>,
    /// May be None (unknown); returns the datapoints per pass or -1.
    pub size: Option<unsafe extern "C" fn(user_data: *mut c_void) -> i64>,
    /// Version 2; may be None (with `restore`). Puts the source's position
    /// after the last datapoint `next` gave into `*out` as a new 1-d u8
    /// tensor, which the library takes. Runs on the thread that iterates the
    /// source (after every datapoint when a thread reads ahead).
    pub save: Option<unsafe extern "C" fn(out: *mut *mut tpt_tensor, user_data: *mut c_void) -> *mut tpt_status>,
    /// Version 2; may be None (with `save`). Gets what `save` made (lent for
    /// the call), right after `reset` at the reset that continues from a
    /// saved state.
    pub restore: Option<unsafe extern "C" fn(state: *const tpt_tensor, user_data: *mut c_void) -> *mut tpt_status>,
}
/// `TPT_DATAFLOW_CALLBACKS_INIT`
pub const TPT_DATAFLOW_CALLBACKS_INIT: tpt_dataflow_callbacks = tpt_dataflow_callbacks {
    version: TPT_DATAFLOW_CALLBACKS_VERSION,
    next: None,
    reset: None,
    size: None,
    save: None,
    restore: None,
};

/// `tpt_decode_fn`
pub type tpt_decode_fn = Option<
    unsafe extern "C" fn(
        dp: *mut tpt_datapoint,
        path: *const c_char,
        index: usize,
        user_data: *mut c_void,
    ) -> *mut tpt_status,
>;
/// `tpt_map_fn`
pub type tpt_map_fn = Option<unsafe extern "C" fn(dp: *mut tpt_datapoint, user_data: *mut c_void) -> *mut tpt_status>;
/// `tpt_component_fn`: `*out` is a new tensor the library takes, or NULL to drop the datapoint.
pub type tpt_component_fn = Option<
    unsafe extern "C" fn(
        out: *mut *mut tpt_tensor,
        value: *const tpt_tensor,
        user_data: *mut c_void,
    ) -> *mut tpt_status,
>;

pub const TPT_PARALLEL_MAP_OPTIONS_VERSION: u32 = 1;
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tpt_parallel_map_options {
    pub version: u32,
    pub n_threads: i32,
    pub buffer_size: i32,
    pub ordered: i32,
    pub strict: i32,
}
/// `TPT_PARALLEL_MAP_OPTIONS_INIT`
pub const TPT_PARALLEL_MAP_OPTIONS_INIT: tpt_parallel_map_options = tpt_parallel_map_options {
    version: TPT_PARALLEL_MAP_OPTIONS_VERSION,
    n_threads: 2,
    buffer_size: 200,
    ordered: 0,
    strict: 0,
};

pub type tpt_augment_kind = c_int;
pub const TPT_AUGMENT_TO_FLOAT: tpt_augment_kind = 1;
pub const TPT_AUGMENT_NORMALIZE: tpt_augment_kind = 2;
pub const TPT_AUGMENT_RANDOM_CROP: tpt_augment_kind = 3;
pub const TPT_AUGMENT_FLIP: tpt_augment_kind = 4;

pub const TPT_AUGMENTOR_VERSION: u32 = 1;
/// One image augmentor: the fields its kind uses.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tpt_augmentor {
    pub version: u32,
    pub kind: tpt_augment_kind,
    pub scale: f64,
    /// Copied.
    pub mean: *const f64,
    /// Copied.
    pub std: *const f64,
    pub n_channels: usize,
    pub height: i64,
    pub width: i64,
    pub padding: i64,
    pub probability: f64,
}
/// `TPT_AUGMENTOR_INIT`
pub const TPT_AUGMENTOR_INIT: tpt_augmentor = tpt_augmentor {
    version: TPT_AUGMENTOR_VERSION,
    kind: TPT_AUGMENT_TO_FLOAT,
    scale: 1.0,
    mean: std::ptr::null(),
    std: std::ptr::null(),
    n_channels: 0,
    height: 0,
    width: 0,
    padding: 0,
    probability: 0.5,
};

// ---- Inputs and the simple trainer
/// Opaque (`tpt_input`).
#[repr(C)]
pub struct tpt_input {
    _private: [u8; 0],
}

/// `tpt_feed_fn`
pub type tpt_feed_fn = Option<
    unsafe extern "C" fn(batch: *mut *mut tpt_tensor, n_inputs: usize, user_data: *mut c_void) -> *mut tpt_status,
>;

pub type tpt_input_kind = c_int;
pub const TPT_INPUT_QUEUE: tpt_input_kind = 1;
pub const TPT_INPUT_FEED: tpt_input_kind = 2;

pub const TPT_INPUT_OPTIONS_VERSION: u32 = 1;
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tpt_input_options {
    pub version: u32,
    pub kind: tpt_input_kind,
    /// Queue capacity in batches.
    pub capacity: i64,
    /// Nonzero: pass after pass, forever; 0: the end of the first pass ends training.
    pub repeat: i32,
}
/// `TPT_INPUT_OPTIONS_INIT`
pub const TPT_INPUT_OPTIONS_INIT: tpt_input_options =
    tpt_input_options { version: TPT_INPUT_OPTIONS_VERSION, kind: TPT_INPUT_QUEUE, capacity: 50, repeat: 1 };

// ---- Towers: data-parallel training on several devices
/// `tpt_strategy`: how the towers share the variables and combine gradients.
pub type tpt_strategy = c_int;
/// One tower (`tpt_trainer_set_model`).
pub const TPT_STRATEGY_SIMPLE: tpt_strategy = 0;
/// SyncMultiGPUTrainerReplicated: a copy of the variables per tower,
/// gradients all-reduced, every copy updated.
pub const TPT_STRATEGY_REPLICATED: tpt_strategy = 1;
/// SyncMultiGPUTrainerParameterServer: shared variables, the towers'
/// gradients averaged and applied once.
pub const TPT_STRATEGY_PARAMETER_SERVER: tpt_strategy = 2;
/// AsyncMultiGPUTrainer: shared variables, each tower's gradients times 1/N
/// applied as an update of their own.
pub const TPT_STRATEGY_ASYNC: tpt_strategy = 3;

pub const TPT_TOWERS_OPTIONS_VERSION: u32 = 3;
/// Options of `tpt_trainer_set_towers` and `tpt_train_config::towers`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tpt_towers_options {
    pub version: u32,
    pub strategy: tpt_strategy,
    /// 1 to 256.
    pub n_towers: i32,
    /// `n_towers` device names; NULL: every tower on "cpu" (only CPU towers
    /// are implemented yet).
    pub devices: *const *const c_char,
    /// Replicated: nonzero averages the gradients, 0 sums them.
    pub average: i32,
    /// LibTorch intra-op threads per tower; 0: the process's divided by
    /// `n_towers`, at least 1.
    pub intra_op_threads: i32,
    /// (version 2) Replicated and parameter server: nonzero reduces a bucket
    /// of gradients as soon as every tower's backward pass has produced
    /// them, while the backward passes go on (PyTorch DDP's reducer); 0
    /// reduces every bucket after all the backward passes. The result is the
    /// same bit for bit.
    pub overlap: i32,
    /// (version 2) The gradients are packed into flat buckets of about this
    /// many bytes (in the order backward produces them), at most 2^40; 0:
    /// 1 MiB.
    pub bucket_bytes: usize,
    /// (version 3) Nonzero: the cost and the scalar outputs the monitors and
    /// step outputs get are averaged over the towers (and over the ranks
    /// too with `tpt_distributed_options::average_scalars`); 0: tower 0's.
    pub average_scalars: i32,
}
/// `TPT_TOWERS_OPTIONS_INIT`
pub const TPT_TOWERS_OPTIONS_INIT: tpt_towers_options = tpt_towers_options {
    version: TPT_TOWERS_OPTIONS_VERSION,
    strategy: TPT_STRATEGY_REPLICATED,
    n_towers: 2,
    devices: std::ptr::null(),
    average: 1,
    intra_op_threads: 0,
    overlap: 1,
    bucket_bytes: 0,
    average_scalars: 0,
};

// ---- Distributed training: several processes
pub const TPT_DISTRIBUTED_OPTIONS_VERSION: u32 = 1;
/// Options of `tpt_trainer_set_distributed` and
/// `tpt_train_config::distributed`; zero fields keep the defaults.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tpt_distributed_options {
    pub version: u32,
    /// Rank 0's host; NULL: MASTER_ADDR.
    pub master_addr: *const c_char,
    /// Its port; 0: MASTER_PORT.
    pub master_port: i32,
    /// 0: WORLD_SIZE, RANK and LOCAL_RANK from the environment; else the
    /// number of processes, with `rank` and `local_rank` below.
    pub world_size: i32,
    /// With `world_size`: this process's, 0 to world_size - 1.
    pub rank: i32,
    /// With `world_size`: its index among the processes of its machine.
    pub local_rank: i32,
    /// The rendezvous and every collective, in ms; 0: 60000.
    pub timeout_ms: i64,
    /// Nonzero: each rank takes every world_size-th batch of the input; 0:
    /// the input is already this rank's share.
    pub shard: i32,
    /// Nonzero: the cost and the monitors' scalar outputs are averaged over
    /// the ranks; 0: rank 0's.
    pub average_scalars: i32,
}
/// `TPT_DISTRIBUTED_OPTIONS_INIT`
pub const TPT_DISTRIBUTED_OPTIONS_INIT: tpt_distributed_options = tpt_distributed_options {
    version: TPT_DISTRIBUTED_OPTIONS_VERSION,
    master_addr: std::ptr::null(),
    master_port: 0,
    world_size: 0,
    rank: 0,
    local_rank: 0,
    timeout_ms: 0,
    shard: 1,
    average_scalars: 0,
};

// ---- Writing a trainer: train ops and the GAN trainers
pub const TPT_TRAIN_OP_VERSION: u32 = 1;
/// One optimisation of the model (tensorpack's `opt.minimize(cost,
/// var_list)`), for `tpt_model_add_train_op`. The strings are copied.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tpt_train_op {
    pub version: u32,
    /// Required, unique in the model.
    pub name: *const c_char,
    /// The tower's one-element output to minimise; NULL: the tower's cost.
    pub cost: *const c_char,
    /// The trainable variables whose names start with it; NULL or "": all.
    pub scope: *const c_char,
    /// Its own optimizer (a reference is taken; not the model's, not another
    /// op's); NULL: a copy of the model's, with slots of its own.
    pub optimizer: *mut tpt_optimizer,
}
/// `TPT_TRAIN_OP_INIT`
pub const TPT_TRAIN_OP_INIT: tpt_train_op = tpt_train_op {
    version: TPT_TRAIN_OP_VERSION,
    name: std::ptr::null(),
    cost: std::ptr::null(),
    scope: std::ptr::null(),
    optimizer: std::ptr::null_mut(),
};

pub const TPT_GAN_OPTIONS_VERSION: u32 = 2;
/// Options of `tpt_trainer_set_gan` (NULL: a GANTrainer with the defaults).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tpt_gan_options {
    pub version: u32,
    /// 0: GANTrainer (one hooked run of G's then D's update per run_step);
    /// nonzero: SeparateGANTrainer (D's hooked run when global_step %
    /// d_period == 0, then G's when global_step % g_period == 0).
    pub separate: i32,
    /// With `separate`: >= 1; one of the two periods must be 1.
    pub d_period: i64,
    pub g_period: i64,
    /// The generator's train op; NULL: "g_op".
    pub g_op: *const c_char,
    /// The discriminator's; NULL: "d_op".
    pub d_op: *const c_char,
    /// (version 2) NULL: one tower; else tensorpack's MultiGPUGANTrainer on
    /// these towers (the replicated or the parameter-server strategy), each
    /// op's cost averaged over the towers. Borrowed for the call.
    pub towers: *const tpt_towers_options,
}
/// `TPT_GAN_OPTIONS_INIT`
pub const TPT_GAN_OPTIONS_INIT: tpt_gan_options = tpt_gan_options {
    version: TPT_GAN_OPTIONS_VERSION,
    separate: 0,
    d_period: 1,
    g_period: 1,
    g_op: std::ptr::null(),
    d_op: std::ptr::null(),
    towers: std::ptr::null(),
};

// ---- TrainConfig and launch
/// `tpt_init_fn`: the init / restore hook of a train config.
pub type tpt_init_fn = Option<unsafe extern "C" fn(model: *mut tpt_model, user_data: *mut c_void) -> *mut tpt_status>;

pub const TPT_TRAIN_CONFIG_VERSION: u32 = 5;
/// Describes a training for `tpt_trainer_from_config` and `tpt_launch_train`.
/// The input, callbacks and monitors are taken (also on failure);
/// `init_user_data` is borrowed and must outlive the trainer.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tpt_train_config {
    pub version: u32,
    /// NULL: defaults (steps_per_epoch from the input).
    pub options: *const tpt_trainer_options,
    /// Required; the trainer takes a reference.
    pub model: *mut tpt_model,
    /// This or `dataflow`; taken.
    pub input: *mut tpt_input,
    /// Taken; registered as user callbacks, in order.
    pub callbacks: *const *mut tpt_callback,
    pub n_callbacks: usize,
    /// Taken; registered after the default monitors.
    pub monitors: *const *mut tpt_callback,
    pub n_monitors: usize,
    /// None: no init hook.
    pub init: tpt_init_fn,
    /// Borrowed: must outlive the trainer.
    pub init_user_data: *mut c_void,
    /// (version 2) This or `input`: batches in signature order, wrapped in a
    /// queue input; the trainer takes a reference.
    pub dataflow: *mut tpt_dataflow,
    /// (version 3) NULL: the simple trainer (one tower); else the strategy
    /// and towers (`tpt_trainer_set_towers`). Borrowed for the call.
    pub towers: *const tpt_towers_options,
    /// (version 4) NULL: one process; else this process is one rank of a
    /// job (`tpt_trainer_set_distributed`). Borrowed for the call.
    pub distributed: *const tpt_distributed_options,
    /// (version 5) With `dataflow`: the input made from it; NULL: the
    /// defaults. Borrowed for the call.
    pub input_options: *const tpt_input_options,
}
/// `TPT_TRAIN_CONFIG_INIT`
pub const TPT_TRAIN_CONFIG_INIT: tpt_train_config = tpt_train_config {
    version: TPT_TRAIN_CONFIG_VERSION,
    options: std::ptr::null(),
    model: std::ptr::null_mut(),
    input: std::ptr::null_mut(),
    callbacks: std::ptr::null(),
    n_callbacks: 0,
    monitors: std::ptr::null(),
    n_monitors: 0,
    init: None,
    init_user_data: std::ptr::null_mut(),
    dataflow: std::ptr::null_mut(),
    towers: std::ptr::null(),
    distributed: std::ptr::null(),
    input_options: std::ptr::null(),
};

extern "C" {
    pub fn tpt_version() -> u32;
    pub fn tpt_version_string() -> *const c_char;
    pub fn tpt_abi_version() -> u32;

    pub fn tpt_status_code(status: *const tpt_status) -> tpt_code;
    pub fn tpt_status_message(status: *const tpt_status) -> *const c_char;
    pub fn tpt_status_free(status: *mut tpt_status);
    pub fn tpt_status_new(code: tpt_code, message: *const c_char) -> *mut tpt_status;
    pub fn tpt_code_name(code: tpt_code) -> *const c_char;

    pub fn tpt_has_feature(feature: tpt_feature) -> c_int;
    pub fn tpt_build_info() -> *const c_char;
    pub fn tpt_set_num_threads(num_threads: c_int) -> *mut tpt_status;
    pub fn tpt_get_num_threads(out: *mut c_int) -> *mut tpt_status;
    pub fn tpt_set_float32_precision(precision: tpt_float32_precision) -> *mut tpt_status;
    pub fn tpt_set_determinism(mode: tpt_determinism) -> *mut tpt_status;

    pub fn tpt_dtype_size(dtype: tpt_dtype) -> usize;
    pub fn tpt_tensor_from_data(
        out: *mut *mut tpt_tensor,
        data: *const c_void,
        nbytes: usize,
        shape: *const i64,
        ndim: usize,
        options: *const tpt_tensor_options,
    ) -> *mut tpt_status;
    pub fn tpt_tensor_free(tensor: *mut tpt_tensor);
    pub fn tpt_tensor_ndim(out: *mut usize, tensor: *const tpt_tensor) -> *mut tpt_status;
    pub fn tpt_tensor_shape(dims: *mut i64, capacity: usize, tensor: *const tpt_tensor) -> *mut tpt_status;
    pub fn tpt_tensor_numel(out: *mut i64, tensor: *const tpt_tensor) -> *mut tpt_status;
    pub fn tpt_tensor_dtype(out: *mut tpt_dtype, tensor: *const tpt_tensor) -> *mut tpt_status;
    pub fn tpt_tensor_copy_to(dst: *mut c_void, nbytes: usize, tensor: *const tpt_tensor) -> *mut tpt_status;
    pub fn tpt_tensor_reshape(
        out: *mut *mut tpt_tensor,
        tensor: *const tpt_tensor,
        shape: *const i64,
        ndim: usize,
    ) -> *mut tpt_status;
    pub fn tpt_tensor_matmul(out: *mut *mut tpt_tensor, a: *const tpt_tensor, b: *const tpt_tensor) -> *mut tpt_status;

    // Sharing memory, devices, DLPack
    pub fn tpt_tensor_from_blob(
        out: *mut *mut tpt_tensor,
        data: *mut c_void,
        shape: *const i64,
        ndim: usize,
        options: *const tpt_tensor_options,
        deleter: tpt_blob_deleter_fn,
        deleter_ctx: *mut c_void,
    ) -> *mut tpt_status;
    pub fn tpt_tensor_share(out: *mut *mut tpt_tensor, tensor: *const tpt_tensor) -> *mut tpt_status;
    pub fn tpt_tensor_keep(out: *mut *mut tpt_tensor, tensor: *const tpt_tensor) -> *mut tpt_status;
    pub fn tpt_tensor_live_handles() -> i64;
    pub fn tpt_tensor_scope_set_mode(mode: tpt_scope_mode) -> *mut tpt_status;
    pub fn tpt_tensor_device(buf: *mut c_char, size: usize, tensor: *const tpt_tensor) -> *mut tpt_status;
    pub fn tpt_tensor_to(
        out: *mut *mut tpt_tensor,
        tensor: *const tpt_tensor,
        device: *const c_char,
        dtype: tpt_dtype,
    ) -> *mut tpt_status;
    pub fn tpt_tensor_item(out: *mut f64, tensor: *const tpt_tensor) -> *mut tpt_status;
    pub fn tpt_tensor_to_dlpack(out: *mut *mut DLManagedTensor, tensor: *const tpt_tensor) -> *mut tpt_status;
    pub fn tpt_tensor_from_dlpack(out: *mut *mut tpt_tensor, src: *mut DLManagedTensor) -> *mut tpt_status;

    // Operators
    pub fn tpt_op_call(
        outputs: *mut *mut tpt_tensor,
        capacity: usize,
        n_outputs: *mut usize,
        op: *const c_char,
        overload: *const c_char,
        args: *const tpt_arg,
        nargs: usize,
    ) -> *mut tpt_status;
    pub fn tpt_op_schemas(buf: *mut c_char, size: usize, needed: *mut usize, op: *const c_char) -> *mut tpt_status;
    pub fn tpt_op_add(out: *mut *mut tpt_tensor, a: *const tpt_tensor, b: *const tpt_tensor) -> *mut tpt_status;
    pub fn tpt_op_sub(out: *mut *mut tpt_tensor, a: *const tpt_tensor, b: *const tpt_tensor) -> *mut tpt_status;
    pub fn tpt_op_mul(out: *mut *mut tpt_tensor, a: *const tpt_tensor, b: *const tpt_tensor) -> *mut tpt_status;
    pub fn tpt_op_div(out: *mut *mut tpt_tensor, a: *const tpt_tensor, b: *const tpt_tensor) -> *mut tpt_status;
    pub fn tpt_op_add_scalar(out: *mut *mut tpt_tensor, a: *const tpt_tensor, b: f64) -> *mut tpt_status;
    pub fn tpt_op_sub_scalar(out: *mut *mut tpt_tensor, a: *const tpt_tensor, b: f64) -> *mut tpt_status;
    pub fn tpt_op_mul_scalar(out: *mut *mut tpt_tensor, a: *const tpt_tensor, b: f64) -> *mut tpt_status;
    pub fn tpt_op_div_scalar(out: *mut *mut tpt_tensor, a: *const tpt_tensor, b: f64) -> *mut tpt_status;
    pub fn tpt_op_eq(out: *mut *mut tpt_tensor, a: *const tpt_tensor, b: *const tpt_tensor) -> *mut tpt_status;
    pub fn tpt_op_gt(out: *mut *mut tpt_tensor, a: *const tpt_tensor, b: *const tpt_tensor) -> *mut tpt_status;
    pub fn tpt_op_ge(out: *mut *mut tpt_tensor, a: *const tpt_tensor, b: *const tpt_tensor) -> *mut tpt_status;
    pub fn tpt_op_lt(out: *mut *mut tpt_tensor, a: *const tpt_tensor, b: *const tpt_tensor) -> *mut tpt_status;
    pub fn tpt_op_le(out: *mut *mut tpt_tensor, a: *const tpt_tensor, b: *const tpt_tensor) -> *mut tpt_status;
    pub fn tpt_op_eq_scalar(out: *mut *mut tpt_tensor, a: *const tpt_tensor, b: f64) -> *mut tpt_status;
    pub fn tpt_op_gt_scalar(out: *mut *mut tpt_tensor, a: *const tpt_tensor, b: f64) -> *mut tpt_status;
    pub fn tpt_op_ge_scalar(out: *mut *mut tpt_tensor, a: *const tpt_tensor, b: f64) -> *mut tpt_status;
    pub fn tpt_op_lt_scalar(out: *mut *mut tpt_tensor, a: *const tpt_tensor, b: f64) -> *mut tpt_status;
    pub fn tpt_op_le_scalar(out: *mut *mut tpt_tensor, a: *const tpt_tensor, b: f64) -> *mut tpt_status;
    pub fn tpt_op_where(
        out: *mut *mut tpt_tensor,
        cond: *const tpt_tensor,
        a: *const tpt_tensor,
        b: *const tpt_tensor,
    ) -> *mut tpt_status;

    // Trainer
    pub fn tpt_trainer_new(out: *mut *mut tpt_trainer, options: *const tpt_trainer_options) -> *mut tpt_status;
    pub fn tpt_trainer_free(trainer: *mut tpt_trainer);
    pub fn tpt_trainer_set_run_step(
        trainer: *mut tpt_trainer,
        run_step: tpt_run_step_fn,
        user_data: *mut c_void,
        destroy: tpt_destroy_fn,
    ) -> *mut tpt_status;
    pub fn tpt_trainer_hooked_step(
        trainer: *mut tpt_trainer,
        step: tpt_step_fn,
        user_data: *mut c_void,
    ) -> *mut tpt_status;
    pub fn tpt_trainer_run(trainer: *mut tpt_trainer) -> *mut tpt_status;
    pub fn tpt_trainer_request_stop(trainer: *mut tpt_trainer) -> *mut tpt_status;
    pub fn tpt_trainer_signal_stop(trainer: *mut tpt_trainer, signo: c_int);
    pub fn tpt_trainer_stop_reason(out: *mut *const c_char, trainer: *const tpt_trainer) -> *mut tpt_status;
    pub fn tpt_trainer_epoch_num(out: *mut i64, trainer: *const tpt_trainer) -> *mut tpt_status;
    pub fn tpt_trainer_local_step(out: *mut i64, trainer: *const tpt_trainer) -> *mut tpt_status;
    pub fn tpt_trainer_global_step(out: *mut i64, trainer: *const tpt_trainer) -> *mut tpt_status;
    pub fn tpt_model_optimizer_slot(
        out: *mut *mut tpt_tensor,
        model: *const tpt_model,
        variable: *const c_char,
        slot: *const c_char,
    ) -> *mut tpt_status;
    pub fn tpt_model_variable_list(
        names: *mut *mut *mut c_char,
        count: *mut usize,
        model: *const tpt_model,
    ) -> *mut tpt_status;
    pub fn tpt_strings_free(strings: *mut *mut c_char, count: usize);
    pub fn tpt_trainer_best_checkpoint(
        out: *mut *const c_char,
        trainer: *const tpt_trainer,
        stat: *const c_char,
    ) -> *mut tpt_status;
    pub fn tpt_trainer_request_stop_because(trainer: *mut tpt_trainer, reason: *const c_char) -> *mut tpt_status;
    pub fn tpt_trainer_steps_per_epoch(out: *mut i64, trainer: *const tpt_trainer) -> *mut tpt_status;
    pub fn tpt_trainer_resumed_from(out: *mut *const c_char, trainer: *const tpt_trainer) -> *mut tpt_status;
    pub fn tpt_trainer_set_global_step(trainer: *mut tpt_trainer, step: i64) -> *mut tpt_status;
    pub fn tpt_trainer_logdir(out: *mut *const c_char, trainer: *const tpt_trainer) -> *mut tpt_status;
    pub fn tpt_trainer_log(trainer: *mut tpt_trainer, message: *const c_char) -> *mut tpt_status;

    // Step outputs
    pub fn tpt_trainer_set_output_scalar(trainer: *mut tpt_trainer, name: *const c_char, value: f64)
        -> *mut tpt_status;
    pub fn tpt_trainer_set_output(
        trainer: *mut tpt_trainer,
        name: *const c_char,
        tensor: *const tpt_tensor,
    ) -> *mut tpt_status;
    pub fn tpt_trainer_output_scalar(
        out: *mut f64,
        trainer: *const tpt_trainer,
        name: *const c_char,
    ) -> *mut tpt_status;
    pub fn tpt_trainer_output(
        out: *mut *mut tpt_tensor,
        trainer: *const tpt_trainer,
        name: *const c_char,
    ) -> *mut tpt_status;

    // Callbacks
    pub fn tpt_callback_new(out: *mut *mut tpt_callback, desc: *const tpt_callback_desc) -> *mut tpt_status;
    pub fn tpt_callback_free(callback: *mut tpt_callback);
    pub fn tpt_callback_periodic_trigger(
        out: *mut *mut tpt_callback,
        inner: *mut tpt_callback,
        every_k_steps: i64,
        every_k_epochs: i64,
        before_train: i32,
    ) -> *mut tpt_status;
    pub fn tpt_callback_enable_if(
        out: *mut *mut tpt_callback,
        inner: *mut tpt_callback,
        predicate: tpt_predicate_fn,
        user_data: *mut c_void,
        destroy: tpt_destroy_fn,
    ) -> *mut tpt_status;
    pub fn tpt_callback_periodic(
        out: *mut *mut tpt_callback,
        inner: *mut tpt_callback,
        every_k_steps: i64,
        every_k_epochs: i64,
    ) -> *mut tpt_status;
    pub fn tpt_trainer_add_callback(trainer: *mut tpt_trainer, callback: *mut tpt_callback) -> *mut tpt_status;

    // Monitors
    pub fn tpt_trainer_add_monitor(trainer: *mut tpt_trainer, monitor: *mut tpt_callback) -> *mut tpt_status;
    pub fn tpt_trainer_put_scalar(trainer: *mut tpt_trainer, name: *const c_char, value: f64) -> *mut tpt_status;
    pub fn tpt_trainer_put_image(
        trainer: *mut tpt_trainer,
        name: *const c_char,
        image: *const tpt_tensor,
    ) -> *mut tpt_status;
    pub fn tpt_image_grid(
        out: *mut *mut tpt_tensor,
        images: *const tpt_tensor,
        options: *const tpt_image_grid_options,
    ) -> *mut tpt_status;
    pub fn tpt_image_write_png(image: *const tpt_tensor, path: *const c_char) -> *mut tpt_status;
    pub fn tpt_monitor_tensorboard(out: *mut *mut tpt_callback, dir: *const c_char) -> *mut tpt_status;
    pub fn tpt_trainer_scalar_latest(
        value_out: *mut f64,
        step_out: *mut i64,
        trainer: *const tpt_trainer,
        name: *const c_char,
    ) -> *mut tpt_status;
    pub fn tpt_trainer_scalar_history(
        count_out: *mut usize,
        steps: *mut i64,
        values: *mut f64,
        capacity: usize,
        trainer: *const tpt_trainer,
        name: *const c_char,
    ) -> *mut tpt_status;

    // Models
    pub fn tpt_model_new(
        out: *mut *mut tpt_model,
        inputs: *const tpt_input_spec,
        n_inputs: usize,
        tower_fn: tpt_tower_fn,
        user_data: *mut c_void,
        destroy: tpt_destroy_fn,
    ) -> *mut tpt_status;
    pub fn tpt_model_free(model: *mut tpt_model);
    pub fn tpt_model_build(model: *mut tpt_model) -> *mut tpt_status;
    pub fn tpt_model_variable(
        out: *mut *mut tpt_tensor,
        model: *const tpt_model,
        name: *const c_char,
    ) -> *mut tpt_status;
    pub fn tpt_model_set_variable(
        model: *mut tpt_model,
        name: *const c_char,
        value: *const tpt_tensor,
    ) -> *mut tpt_status;
    pub fn tpt_model_variable_names(
        buf: *mut c_char,
        size: usize,
        needed: *mut usize,
        model: *const tpt_model,
    ) -> *mut tpt_status;
    pub fn tpt_model_infer(
        outputs: *mut *mut tpt_tensor,
        model: *mut tpt_model,
        inputs: *const *const tpt_tensor,
        n_inputs: usize,
        names: *const *const c_char,
        n_names: usize,
    ) -> *mut tpt_status;

    // Inside a tower function
    pub fn tpt_tower_is_training(out: *mut i32, tower: *const tpt_tower) -> *mut tpt_status;
    pub fn tpt_tower_is_building(out: *mut i32, tower: *const tpt_tower) -> *mut tpt_status;
    pub fn tpt_tower_index(out: *mut i32, tower: *const tpt_tower) -> *mut tpt_status;
    pub fn tpt_tower_name(buf: *mut c_char, size: usize, tower: *const tpt_tower) -> *mut tpt_status;
    pub fn tpt_tower_device(buf: *mut c_char, size: usize, tower: *const tpt_tower) -> *mut tpt_status;
    pub fn tpt_tower_can_create_variables(out: *mut i32, tower: *const tpt_tower) -> *mut tpt_status;
    pub fn tpt_tower_set_cost(tower: *mut tpt_tower, cost: *const tpt_tensor) -> *mut tpt_status;
    pub fn tpt_tower_set_output(
        tower: *mut tpt_tower,
        name: *const c_char,
        value: *const tpt_tensor,
    ) -> *mut tpt_status;
    pub fn tpt_tower_push_scope(tower: *mut tpt_tower, scope: *const c_char) -> *mut tpt_status;
    pub fn tpt_tower_push_reuse_scope(tower: *mut tpt_tower, scope: *const c_char) -> *mut tpt_status;
    pub fn tpt_tower_pop_scope(tower: *mut tpt_tower) -> *mut tpt_status;
    pub fn tpt_tower_variable(
        out: *mut *mut tpt_tensor,
        tower: *mut tpt_tower,
        name: *const c_char,
        shape: *const i64,
        ndim: usize,
        options: *const tpt_variable_options,
    ) -> *mut tpt_status;
    pub fn tpt_manual_seed(seed: u64) -> *mut tpt_status;

    // TorchScript models
    pub fn tpt_model_from_torchscript(
        out: *mut *mut tpt_model,
        path: *const c_char,
        inputs: *const tpt_input_spec,
        n_inputs: usize,
    ) -> *mut tpt_status;
    pub fn tpt_model_from_torchscript_source(
        out: *mut *mut tpt_model,
        source: *const c_char,
        params: *const tpt_torchscript_param,
        n_params: usize,
        inputs: *const tpt_input_spec,
        n_inputs: usize,
    ) -> *mut tpt_status;
    pub fn tpt_model_save_torchscript(model: *const tpt_model, path: *const c_char) -> *mut tpt_status;

    // Layers, losses and metrics
    pub fn tpt_layer_fc(
        out: *mut *mut tpt_tensor,
        tower: *mut tpt_tower,
        name: *const c_char,
        x: *const tpt_tensor,
        units: i64,
        options: *const tpt_layer_options,
    ) -> *mut tpt_status;
    pub fn tpt_layer_conv2d(
        out: *mut *mut tpt_tensor,
        tower: *mut tpt_tower,
        name: *const c_char,
        x: *const tpt_tensor,
        filters: i64,
        options: *const tpt_layer_options,
    ) -> *mut tpt_status;
    pub fn tpt_layer_conv2d_transpose(
        out: *mut *mut tpt_tensor,
        tower: *mut tpt_tower,
        name: *const c_char,
        x: *const tpt_tensor,
        filters: i64,
        options: *const tpt_layer_options,
    ) -> *mut tpt_status;
    pub fn tpt_layer_max_pool(
        out: *mut *mut tpt_tensor,
        x: *const tpt_tensor,
        kernel: i64,
        stride: i64,
        padding: tpt_padding,
    ) -> *mut tpt_status;
    pub fn tpt_layer_avg_pool(
        out: *mut *mut tpt_tensor,
        x: *const tpt_tensor,
        kernel: i64,
        stride: i64,
        padding: tpt_padding,
    ) -> *mut tpt_status;
    pub fn tpt_layer_global_avg_pool(out: *mut *mut tpt_tensor, x: *const tpt_tensor) -> *mut tpt_status;
    pub fn tpt_layer_batch_norm(
        out: *mut *mut tpt_tensor,
        tower: *mut tpt_tower,
        name: *const c_char,
        x: *const tpt_tensor,
        momentum: f64,
        eps: f64,
    ) -> *mut tpt_status;
    pub fn tpt_layer_layer_norm(
        out: *mut *mut tpt_tensor,
        tower: *mut tpt_tower,
        name: *const c_char,
        x: *const tpt_tensor,
        eps: f64,
    ) -> *mut tpt_status;
    pub fn tpt_layer_layer_norm_axes(
        out: *mut *mut tpt_tensor,
        tower: *mut tpt_tower,
        name: *const c_char,
        x: *const tpt_tensor,
        axes: *const i64,
        n_axes: usize,
        channel_axis: i64,
        eps: f64,
    ) -> *mut tpt_status;
    pub fn tpt_layer_dropout(
        out: *mut *mut tpt_tensor,
        tower: *const tpt_tower,
        x: *const tpt_tensor,
        rate: f64,
    ) -> *mut tpt_status;
    pub fn tpt_layer_activation(
        out: *mut *mut tpt_tensor,
        x: *const tpt_tensor,
        activation: tpt_activation,
        alpha: f64,
    ) -> *mut tpt_status;
    pub fn tpt_layer_flatten(out: *mut *mut tpt_tensor, x: *const tpt_tensor) -> *mut tpt_status;
    pub fn tpt_layer_concat(
        out: *mut *mut tpt_tensor,
        xs: *const *const tpt_tensor,
        n: usize,
        dim: i64,
    ) -> *mut tpt_status;
    pub fn tpt_loss_softmax_cross_entropy(
        out: *mut *mut tpt_tensor,
        logits: *const tpt_tensor,
        labels: *const tpt_tensor,
    ) -> *mut tpt_status;
    pub fn tpt_loss_sigmoid_cross_entropy(
        out: *mut *mut tpt_tensor,
        logits: *const tpt_tensor,
        targets: *const tpt_tensor,
    ) -> *mut tpt_status;
    pub fn tpt_loss_mse(
        out: *mut *mut tpt_tensor,
        prediction: *const tpt_tensor,
        target: *const tpt_tensor,
    ) -> *mut tpt_status;
    pub fn tpt_loss_l1(
        out: *mut *mut tpt_tensor,
        prediction: *const tpt_tensor,
        target: *const tpt_tensor,
    ) -> *mut tpt_status;
    pub fn tpt_regularize_l2(
        out: *mut *mut tpt_tensor,
        tower: *mut tpt_tower,
        pattern: *const c_char,
        weight: f64,
    ) -> *mut tpt_status;
    pub fn tpt_metric_accuracy(
        out: *mut *mut tpt_tensor,
        logits: *const tpt_tensor,
        labels: *const tpt_tensor,
    ) -> *mut tpt_status;
    pub fn tpt_metric_wrong(
        out: *mut *mut tpt_tensor,
        logits: *const tpt_tensor,
        labels: *const tpt_tensor,
        k: i64,
    ) -> *mut tpt_status;

    // Optimizers
    pub fn tpt_optimizer_new(out: *mut *mut tpt_optimizer, kind: *const c_char) -> *mut tpt_status;
    pub fn tpt_optimizer_free(optimizer: *mut tpt_optimizer);
    pub fn tpt_optimizer_set(optimizer: *mut tpt_optimizer, name: *const c_char, value: f64) -> *mut tpt_status;
    pub fn tpt_optimizer_get(out: *mut f64, optimizer: *const tpt_optimizer, name: *const c_char) -> *mut tpt_status;
    pub fn tpt_callback_scheduled_hyperparam(
        out: *mut *mut tpt_callback,
        optimizer: *mut tpt_optimizer,
        param: *const c_char,
        schedule: *const tpt_schedule_point,
        n_points: usize,
        flags: u32,
    ) -> *mut tpt_status;
    pub fn tpt_callback_hyperparam_func(
        out: *mut *mut tpt_callback,
        optimizer: *mut tpt_optimizer,
        param: *const c_char,
        fn_: tpt_hyperparam_fn,
        user_data: *mut c_void,
        destroy: tpt_destroy_fn,
    ) -> *mut tpt_status;
    pub fn tpt_callback_stat_monitor_param(
        out: *mut *mut tpt_callback,
        optimizer: *mut tpt_optimizer,
        param: *const c_char,
        stat: *const c_char,
        options: *const tpt_stat_monitor_options,
    ) -> *mut tpt_status;
    pub fn tpt_callback_human_hyperparam(
        out: *mut *mut tpt_callback,
        optimizer: *mut tpt_optimizer,
        param: *const c_char,
        file: *const c_char,
    ) -> *mut tpt_status;
    pub fn tpt_optimizer_scale_gradients(
        optimizer: *mut tpt_optimizer,
        pattern: *const c_char,
        factor: f64,
    ) -> *mut tpt_status;
    pub fn tpt_model_set_optimizer(model: *mut tpt_model, optimizer: *mut tpt_optimizer) -> *mut tpt_status;

    // Dataflows: datapoints
    pub fn tpt_datapoint_new(out: *mut *mut tpt_datapoint) -> *mut tpt_status;
    pub fn tpt_datapoint_free(dp: *mut tpt_datapoint);
    pub fn tpt_datapoint_size(dp: *const tpt_datapoint) -> usize;
    pub fn tpt_datapoint_get(out: *mut *mut tpt_tensor, dp: *const tpt_datapoint, index: usize) -> *mut tpt_status;
    pub fn tpt_datapoint_set(dp: *mut tpt_datapoint, index: usize, value: *const tpt_tensor) -> *mut tpt_status;
    pub fn tpt_datapoint_truncate(dp: *mut tpt_datapoint, size: usize) -> *mut tpt_status;
    pub fn tpt_datapoint_seed(out: *mut u64, dp: *const tpt_datapoint) -> *mut tpt_status;

    // Dataflows: sources
    pub fn tpt_dataflow_from_callbacks(
        out: *mut *mut tpt_dataflow,
        callbacks: *const tpt_dataflow_callbacks,
        user_data: *mut c_void,
        destroy: tpt_destroy_fn,
    ) -> *mut tpt_status;
    pub fn tpt_dataflow_from_tensors(
        out: *mut *mut tpt_dataflow,
        tensors: *const *const tpt_tensor,
        n_tensors: usize,
        shuffle: i32,
    ) -> *mut tpt_status;
    pub fn tpt_dataflow_from_idx(
        out: *mut *mut tpt_dataflow,
        paths: *const *const c_char,
        n_paths: usize,
        shuffle: i32,
    ) -> *mut tpt_status;
    pub fn tpt_dataflow_mnist(
        out: *mut *mut tpt_dataflow,
        dir: *const c_char,
        split: *const c_char,
        shuffle: i32,
    ) -> *mut tpt_status;
    pub fn tpt_dataflow_from_files(
        out: *mut *mut tpt_dataflow,
        paths: *const *const c_char,
        n_paths: usize,
        shuffle: i32,
        n_threads: i32,
        decode: tpt_decode_fn,
        user_data: *mut c_void,
        destroy: tpt_destroy_fn,
    ) -> *mut tpt_status;
    pub fn tpt_dataflow_fake(
        out: *mut *mut tpt_dataflow,
        components: *const tpt_input_spec,
        n_components: usize,
        size: i64,
        random: i32,
        low: f64,
        high: f64,
    ) -> *mut tpt_status;

    // Dataflows: combinators
    pub fn tpt_dataflow_batch(
        out: *mut *mut tpt_dataflow,
        df: *mut tpt_dataflow,
        batch_size: i64,
        remainder: i32,
    ) -> *mut tpt_status;
    pub fn tpt_dataflow_map(
        out: *mut *mut tpt_dataflow,
        df: *mut tpt_dataflow,
        fn_: tpt_map_fn,
        user_data: *mut c_void,
        destroy: tpt_destroy_fn,
    ) -> *mut tpt_status;
    pub fn tpt_dataflow_map_component(
        out: *mut *mut tpt_dataflow,
        df: *mut tpt_dataflow,
        index: usize,
        fn_: tpt_component_fn,
        user_data: *mut c_void,
        destroy: tpt_destroy_fn,
    ) -> *mut tpt_status;
    pub fn tpt_dataflow_parallel_map(
        out: *mut *mut tpt_dataflow,
        df: *mut tpt_dataflow,
        fn_: tpt_map_fn,
        user_data: *mut c_void,
        destroy: tpt_destroy_fn,
        options: *const tpt_parallel_map_options,
    ) -> *mut tpt_status;
    pub fn tpt_dataflow_prefetch(out: *mut *mut tpt_dataflow, df: *mut tpt_dataflow, capacity: i64) -> *mut tpt_status;
    pub fn tpt_dataflow_local_shuffle(
        out: *mut *mut tpt_dataflow,
        df: *mut tpt_dataflow,
        buffer_size: i64,
        n_reuse: i64,
    ) -> *mut tpt_status;
    pub fn tpt_dataflow_cache(out: *mut *mut tpt_dataflow, df: *mut tpt_dataflow, shuffle: i32) -> *mut tpt_status;
    pub fn tpt_dataflow_repeat(out: *mut *mut tpt_dataflow, df: *mut tpt_dataflow, n: i64) -> *mut tpt_status;
    pub fn tpt_dataflow_fixed_size(
        out: *mut *mut tpt_dataflow,
        df: *mut tpt_dataflow,
        size: i64,
        keep_state: i32,
    ) -> *mut tpt_status;
    pub fn tpt_dataflow_shard(
        out: *mut *mut tpt_dataflow,
        df: *mut tpt_dataflow,
        index: i64,
        count: i64,
    ) -> *mut tpt_status;
    pub fn tpt_dataflow_concat(out: *mut *mut tpt_dataflow, dfs: *const *mut tpt_dataflow, n: usize)
        -> *mut tpt_status;
    pub fn tpt_dataflow_join(out: *mut *mut tpt_dataflow, dfs: *const *mut tpt_dataflow, n: usize) -> *mut tpt_status;
    pub fn tpt_dataflow_select(
        out: *mut *mut tpt_dataflow,
        df: *mut tpt_dataflow,
        indices: *const usize,
        n: usize,
    ) -> *mut tpt_status;

    // Dataflows: image augmentation
    pub fn tpt_dataflow_augment(
        out: *mut *mut tpt_dataflow,
        df: *mut tpt_dataflow,
        index: usize,
        augmentors: *const tpt_augmentor,
        n_augmentors: usize,
        n_threads: i32,
    ) -> *mut tpt_status;

    // Dataflows: iterating, seeds and state
    pub fn tpt_dataflow_reset_state(df: *mut tpt_dataflow) -> *mut tpt_status;
    pub fn tpt_dataflow_next(df: *mut tpt_dataflow, dp: *mut tpt_datapoint) -> *mut tpt_status;
    pub fn tpt_dataflow_size(out: *mut i64, df: *const tpt_dataflow) -> *mut tpt_status;
    pub fn tpt_dataflow_set_seed(df: *mut tpt_dataflow, seed: u64) -> *mut tpt_status;
    pub fn tpt_dataflow_get_state(out: *mut *mut tpt_tensor, df: *const tpt_dataflow) -> *mut tpt_status;
    pub fn tpt_dataflow_set_state(df: *mut tpt_dataflow, state: *const tpt_tensor) -> *mut tpt_status;
    pub fn tpt_dataflow_free(df: *mut tpt_dataflow);

    // Inputs and the simple trainer
    pub fn tpt_input_from_tensors(
        out: *mut *mut tpt_input,
        tensors: *const *const tpt_tensor,
        n_tensors: usize,
        batch_size: i64,
        shuffle: i32,
        seed: u64,
    ) -> *mut tpt_status;
    pub fn tpt_input_from_feed(
        out: *mut *mut tpt_input,
        feed: tpt_feed_fn,
        user_data: *mut c_void,
        destroy: tpt_destroy_fn,
    ) -> *mut tpt_status;
    pub fn tpt_input_from_dataflow(
        out: *mut *mut tpt_input,
        df: *mut tpt_dataflow,
        options: *const tpt_input_options,
    ) -> *mut tpt_status;
    pub fn tpt_input_staging(out: *mut *mut tpt_input, input: *mut tpt_input, device: *const c_char)
        -> *mut tpt_status;
    pub fn tpt_input_dummy(out: *mut *mut tpt_input, batch_size: i64) -> *mut tpt_status;
    pub fn tpt_input_free(input: *mut tpt_input);
    pub fn tpt_trainer_set_model(
        trainer: *mut tpt_trainer,
        model: *mut tpt_model,
        input: *mut tpt_input,
    ) -> *mut tpt_status;
    pub fn tpt_trainer_set_towers(
        trainer: *mut tpt_trainer,
        model: *mut tpt_model,
        input: *mut tpt_input,
        options: *const tpt_towers_options,
    ) -> *mut tpt_status;
    pub fn tpt_trainer_set_distributed(
        trainer: *mut tpt_trainer,
        options: *const tpt_distributed_options,
    ) -> *mut tpt_status;
    pub fn tpt_trainer_rank(rank: *mut i32, world_size: *mut i32, trainer: *const tpt_trainer) -> *mut tpt_status;
    pub fn tpt_model_add_train_op(model: *mut tpt_model, op: *const tpt_train_op) -> *mut tpt_status;
    pub fn tpt_trainer_run_train_ops(
        trainer: *mut tpt_trainer,
        names: *const *const c_char,
        n: usize,
        hooked: i32,
    ) -> *mut tpt_status;
    pub fn tpt_trainer_set_train_ops(
        trainer: *mut tpt_trainer,
        names: *const *const c_char,
        n: usize,
    ) -> *mut tpt_status;
    pub fn tpt_trainer_set_gan(
        trainer: *mut tpt_trainer,
        model: *mut tpt_model,
        input: *mut tpt_input,
        options: *const tpt_gan_options,
    ) -> *mut tpt_status;
    pub fn tpt_inferencer_scalar_stats(
        out: *mut *mut tpt_inferencer,
        outputs: *const *const c_char,
        n_outputs: usize,
        prefix: *const c_char,
    ) -> *mut tpt_status;
    pub fn tpt_inferencer_classification_error(
        out: *mut *mut tpt_inferencer,
        wrong_output: *const c_char,
        summary_name: *const c_char,
    ) -> *mut tpt_status;
    pub fn tpt_inferencer_new(out: *mut *mut tpt_inferencer, desc: *const tpt_inferencer_desc) -> *mut tpt_status;
    pub fn tpt_inferencer_free(inferencer: *mut tpt_inferencer);
    pub fn tpt_inference_runner(
        out: *mut *mut tpt_callback,
        model: *mut tpt_model,
        df: *mut tpt_dataflow,
        inferencers: *const *mut tpt_inferencer,
        n_inferencers: usize,
    ) -> *mut tpt_status;
    pub fn tpt_inference_runner_data_parallel(
        out: *mut *mut tpt_callback,
        model: *mut tpt_model,
        df: *mut tpt_dataflow,
        inferencers: *const *mut tpt_inferencer,
        n_inferencers: usize,
        n_towers: i32,
    ) -> *mut tpt_status;
    pub fn tpt_inference_runner_new(
        out: *mut *mut tpt_callback,
        model: *mut tpt_model,
        df: *mut tpt_dataflow,
        outputs: *const *const c_char,
        n_outputs: usize,
    ) -> *mut tpt_status;
    pub fn tpt_predictor_new(
        out: *mut *mut tpt_predictor,
        model: *mut tpt_model,
        output_names: *const *const c_char,
        n_outputs: usize,
        options: *const tpt_predictor_options,
    ) -> *mut tpt_status;
    pub fn tpt_predictor_run(
        outputs: *mut *mut tpt_tensor,
        predictor: *const tpt_predictor,
        inputs: *const *const tpt_tensor,
        n_inputs: usize,
    ) -> *mut tpt_status;
    pub fn tpt_predictor_free(predictor: *mut tpt_predictor);

    // TrainConfig and launch
    pub fn tpt_trainer_model(out: *mut *mut tpt_model, trainer: *const tpt_trainer) -> *mut tpt_status;
    pub fn tpt_trainer_optimizer(out: *mut *mut tpt_optimizer, trainer: *const tpt_trainer) -> *mut tpt_status;
    pub fn tpt_trainer_from_config(out: *mut *mut tpt_trainer, config: *const tpt_train_config) -> *mut tpt_status;
    pub fn tpt_launch_train(config: *const tpt_train_config) -> *mut tpt_status;

    // Checkpoints and resume
    pub fn tpt_callback_model_saver(
        out: *mut *mut tpt_callback,
        options: *const tpt_model_saver_options,
    ) -> *mut tpt_status;
    pub fn tpt_callback_min_saver(
        out: *mut *mut tpt_callback,
        stat: *const c_char,
        filename: *const c_char,
        dir: *const c_char,
    ) -> *mut tpt_status;
    pub fn tpt_callback_max_saver(
        out: *mut *mut tpt_callback,
        stat: *const c_char,
        filename: *const c_char,
        dir: *const c_char,
    ) -> *mut tpt_status;
    pub fn tpt_trainer_resume(trainer: *mut tpt_trainer, path: *const c_char) -> *mut tpt_status;
    pub fn tpt_trainer_save_checkpoint(trainer: *mut tpt_trainer, path: *const c_char) -> *mut tpt_status;
    pub fn tpt_model_restore(
        n_restored: *mut usize,
        model: *mut tpt_model,
        path: *const c_char,
        options: *const tpt_restore_options,
    ) -> *mut tpt_status;
    pub fn tpt_set_checkpoint_read_limit(bytes: u64) -> *mut tpt_status;

    // More callbacks
    pub fn tpt_callback_early_stopping(
        out: *mut *mut tpt_callback,
        stat: *const c_char,
        options: *const tpt_early_stopping_options,
    ) -> *mut tpt_status;
    pub fn tpt_callback_terminate_on_nan(
        out: *mut *mut tpt_callback,
        outputs: *const *const c_char,
        n_outputs: usize,
    ) -> *mut tpt_status;
    pub fn tpt_callback_throughput(out: *mut *mut tpt_callback, samples_per_step: i64) -> *mut tpt_status;
    pub fn tpt_callback_step_watchdog(out: *mut *mut tpt_callback, timeout_seconds: f64) -> *mut tpt_status;
    pub fn tpt_callback_host_memory(out: *mut *mut tpt_callback) -> *mut tpt_status;
}

// ---- Hyper-parameter schedules
/// `tpt_schedule_point`
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct tpt_schedule_point {
    pub at: i64,
    pub value: f64,
}
pub const TPT_SCHEDULE_LINEAR: u32 = 1;
pub const TPT_SCHEDULE_STEP_BASED: u32 = 2;
pub const TPT_SCHEDULE_NOT_AT_BEGINNING: u32 = 4;

/// `tpt_hyperparam_fn`: `*value` is the value to set after `epoch_num`
/// finished epochs; NULL or an error that fails training.
pub type tpt_hyperparam_fn = Option<
    unsafe extern "C" fn(value: *mut f64, epoch_num: i64, current: f64, user_data: *mut c_void) -> *mut tpt_status,
>;

pub const TPT_STAT_MONITOR_OPTIONS_VERSION: u32 = 1;
/// Options of `tpt_callback_stat_monitor_param`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tpt_stat_monitor_options {
    pub version: u32,
    /// The values compared, >= 2.
    pub last_k: i64,
    /// At least 0.
    pub threshold: f64,
    /// Nonzero: the stat should grow (tensorpack's `reverse`).
    pub maximize: i32,
    /// The new value is current * factor; > 0.
    pub factor: f64,
    /// A floor when factor < 1, a ceiling when factor > 1; 0: no limit.
    pub limit: f64,
}
/// `TPT_STAT_MONITOR_OPTIONS_INIT`
pub const TPT_STAT_MONITOR_OPTIONS_INIT: tpt_stat_monitor_options = tpt_stat_monitor_options {
    version: TPT_STAT_MONITOR_OPTIONS_VERSION,
    last_k: 5,
    threshold: 0.0,
    maximize: 0,
    factor: 0.1,
    limit: 0.0,
};

// ---- Checkpoints and resume
pub const TPT_MODEL_SAVER_OPTIONS_VERSION: u32 = 1;
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tpt_model_saver_options {
    pub version: u32,
    pub max_to_keep: i32,
    pub keep_every_n_hours: f64,
    pub every_k_steps: i64,
    pub every_k_epochs: i64,
    pub dir: *const c_char,
}
/// `TPT_MODEL_SAVER_OPTIONS_INIT`
pub const TPT_MODEL_SAVER_OPTIONS_INIT: tpt_model_saver_options = tpt_model_saver_options {
    version: TPT_MODEL_SAVER_OPTIONS_VERSION,
    max_to_keep: 10,
    keep_every_n_hours: 0.5,
    every_k_steps: 0,
    every_k_epochs: 1,
    dir: std::ptr::null(),
};

pub const TPT_RESTORE_OPTIONS_VERSION: u32 = 1;
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tpt_restore_options {
    pub version: u32,
    pub ignore_missing: i32,
    pub ignore_unexpected: i32,
    pub ignore_shape_mismatch: i32,
    pub prefix: *const c_char,
    /// `n_name_map` pairs: a variable's name, then its name in the file.
    pub name_map: *const *const c_char,
    pub n_name_map: usize,
}
/// `TPT_RESTORE_OPTIONS_INIT`
pub const TPT_RESTORE_OPTIONS_INIT: tpt_restore_options = tpt_restore_options {
    version: TPT_RESTORE_OPTIONS_VERSION,
    ignore_missing: 0,
    ignore_unexpected: 1,
    ignore_shape_mismatch: 0,
    prefix: std::ptr::null(),
    name_map: std::ptr::null(),
    n_name_map: 0,
};

// ---- More callbacks
pub const TPT_EARLY_STOPPING_OPTIONS_VERSION: u32 = 1;
/// Options of `tpt_callback_early_stopping`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tpt_early_stopping_options {
    pub version: u32,
    /// Checks without improvement before stopping, >= 1.
    pub patience: i64,
    /// An improvement is by more than this, >= 0.
    pub min_delta: f64,
    /// Nonzero: higher is better.
    pub maximize: i32,
}
/// `TPT_EARLY_STOPPING_OPTIONS_INIT`
pub const TPT_EARLY_STOPPING_OPTIONS_INIT: tpt_early_stopping_options = tpt_early_stopping_options {
    version: TPT_EARLY_STOPPING_OPTIONS_VERSION,
    patience: 3,
    min_delta: 0.0,
    maximize: 0,
};

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn header_and_library_versions_agree() {
        unsafe {
            assert_eq!(tpt_version(), TPT_VERSION_NUMBER);
            assert_eq!(tpt_abi_version(), TPT_ABI_VERSION);
        }
    }

    #[test]
    fn tensor_options_layout_matches_c() {
        // Same numbers as tests/abi/abi_layout.h.
        assert_eq!(offset_of!(tpt_tensor_options, version), 0);
        assert_eq!(offset_of!(tpt_tensor_options, dtype), 4);
        assert_eq!(offset_of!(tpt_tensor_options, device), 8);
        assert_eq!(offset_of!(tpt_tensor_options, requires_grad), 8 + size_of::<usize>());
        assert_eq!(size_of::<tpt_tensor_options>(), 8 + 2 * size_of::<usize>());
    }

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn trainer_options_layout_matches_c() {
        assert_eq!(offset_of!(tpt_trainer_options, version), 0);
        assert_eq!(offset_of!(tpt_trainer_options, is_chief), 4);
        assert_eq!(offset_of!(tpt_trainer_options, starting_epoch), 8);
        assert_eq!(offset_of!(tpt_trainer_options, max_epoch), 16);
        assert_eq!(offset_of!(tpt_trainer_options, steps_per_epoch), 24);
        assert_eq!(offset_of!(tpt_trainer_options, logdir), 32);
        assert_eq!(offset_of!(tpt_trainer_options, logdir_action), 40);
        assert_eq!(offset_of!(tpt_trainer_options, progress), 44);
        assert_eq!(offset_of!(tpt_trainer_options, console), 48);
        assert_eq!(offset_of!(tpt_trainer_options, default_callbacks), 52);
        assert_eq!(offset_of!(tpt_trainer_options, default_monitors), 56);
        assert_eq!(offset_of!(tpt_trainer_options, scalar_history), 64);
        assert_eq!(offset_of!(tpt_trainer_options, summary_period), 72);
        assert_eq!(offset_of!(tpt_trainer_options, auto_resume), 80);
        assert_eq!(offset_of!(tpt_trainer_options, stop_on_signals), 84);
        assert_eq!(offset_of!(tpt_trainer_options, precision), 88);
        assert_eq!(offset_of!(tpt_trainer_options, loss_scaling), 96);
        assert_eq!(offset_of!(tpt_trainer_options, continue_stopped), 136);
        assert_eq!(offset_of!(tpt_predictor_options, input_names), 8);
        assert_eq!(offset_of!(tpt_predictor_options, checkpoint), 24);
        assert_eq!(size_of::<tpt_predictor_options>(), 32);
        assert_eq!(size_of::<tpt_trainer_options>(), 144);
        assert_eq!(offset_of!(tpt_loss_scaling, init_scale), 8);
        assert_eq!(offset_of!(tpt_loss_scaling, growth_interval), 32);
        assert_eq!(size_of::<tpt_loss_scaling>(), 40);
    }

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn callback_desc_layout_matches_c() {
        assert_eq!(offset_of!(tpt_callback_desc, version), 0);
        assert_eq!(offset_of!(tpt_callback_desc, events), 4);
        assert_eq!(offset_of!(tpt_callback_desc, name), 8);
        assert_eq!(offset_of!(tpt_callback_desc, chief_only), 16);
        assert_eq!(offset_of!(tpt_callback_desc, fn_), 24);
        assert_eq!(offset_of!(tpt_callback_desc, user_data), 32);
        assert_eq!(offset_of!(tpt_callback_desc, destroy), 40);
        assert_eq!(offset_of!(tpt_callback_desc, save), 48);
        assert_eq!(offset_of!(tpt_callback_desc, restore), 56);
        assert_eq!(size_of::<tpt_callback_desc>(), 64);
        // A nullable function pointer is one pointer wide.
        assert_eq!(size_of::<tpt_callback_fn>(), size_of::<usize>());
    }

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn checkpoint_options_layout_matches_c() {
        assert_eq!(offset_of!(tpt_model_saver_options, max_to_keep), 4);
        assert_eq!(offset_of!(tpt_model_saver_options, keep_every_n_hours), 8);
        assert_eq!(offset_of!(tpt_model_saver_options, every_k_steps), 16);
        assert_eq!(offset_of!(tpt_model_saver_options, every_k_epochs), 24);
        assert_eq!(offset_of!(tpt_model_saver_options, dir), 32);
        assert_eq!(size_of::<tpt_model_saver_options>(), 40);
        assert_eq!(offset_of!(tpt_restore_options, ignore_shape_mismatch), 12);
        assert_eq!(offset_of!(tpt_restore_options, prefix), 16);
        assert_eq!(offset_of!(tpt_restore_options, name_map), 24);
        assert_eq!(offset_of!(tpt_restore_options, n_name_map), 32);
        assert_eq!(size_of::<tpt_restore_options>(), 40);
    }

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn record_layout_matches_c() {
        assert_eq!(offset_of!(tpt_record, struct_size), 0);
        assert_eq!(offset_of!(tpt_record, kind), 4);
        assert_eq!(offset_of!(tpt_record, name), 8);
        assert_eq!(offset_of!(tpt_record, global_step), 16);
        assert_eq!(offset_of!(tpt_record, epoch_num), 24);
        assert_eq!(offset_of!(tpt_record, value), 32);
        assert_eq!(offset_of!(tpt_record, tensor), 40);
        assert_eq!(size_of::<tpt_record>(), 48);
    }

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn catalogue_structs_layout_matches_c() {
        assert_eq!(offset_of!(tpt_stat_monitor_options, last_k), 8);
        assert_eq!(offset_of!(tpt_stat_monitor_options, threshold), 16);
        assert_eq!(offset_of!(tpt_stat_monitor_options, maximize), 24);
        assert_eq!(offset_of!(tpt_stat_monitor_options, factor), 32);
        assert_eq!(offset_of!(tpt_stat_monitor_options, limit), 40);
        assert_eq!(size_of::<tpt_stat_monitor_options>(), 48);
        assert_eq!(offset_of!(tpt_early_stopping_options, patience), 8);
        assert_eq!(offset_of!(tpt_early_stopping_options, min_delta), 16);
        assert_eq!(offset_of!(tpt_early_stopping_options, maximize), 24);
        assert_eq!(size_of::<tpt_early_stopping_options>(), 32);
        assert_eq!(offset_of!(tpt_inferencer_desc, name), 8);
        assert_eq!(offset_of!(tpt_inferencer_desc, outputs), 16);
        assert_eq!(offset_of!(tpt_inferencer_desc, n_outputs), 24);
        assert_eq!(offset_of!(tpt_inferencer_desc, before), 32);
        assert_eq!(offset_of!(tpt_inferencer_desc, on_outputs), 40);
        assert_eq!(offset_of!(tpt_inferencer_desc, after), 48);
        assert_eq!(offset_of!(tpt_inferencer_desc, user_data), 56);
        assert_eq!(offset_of!(tpt_inferencer_desc, destroy), 64);
        assert_eq!(size_of::<tpt_inferencer_desc>(), 72);
        assert_eq!(size_of::<tpt_hyperparam_fn>(), size_of::<usize>());
        let s = TPT_STAT_MONITOR_OPTIONS_INIT;
        assert_eq!((s.version, s.last_k, s.threshold, s.maximize, s.factor, s.limit), (1, 5, 0.0, 0, 0.1, 0.0));
        let e = TPT_EARLY_STOPPING_OPTIONS_INIT;
        assert_eq!((e.version, e.patience, e.min_delta, e.maximize), (1, 3, 0.0, 0));
        let d = TPT_INFERENCER_DESC_INIT;
        assert_eq!((d.version, d.n_outputs), (1, 0));
        assert!(d.name.is_null() && d.outputs.is_null() && d.user_data.is_null());
        assert!(d.before.is_none() && d.on_outputs.is_none() && d.after.is_none() && d.destroy.is_none());
    }

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn arg_layout_matches_c() {
        // Checked against the header with offsetof.
        assert_eq!(offset_of!(tpt_arg, kind), 0);
        assert_eq!(offset_of!(tpt_arg, name), 8);
        assert_eq!(offset_of!(tpt_arg, tensor), 16);
        assert_eq!(offset_of!(tpt_arg, i), 24);
        assert_eq!(offset_of!(tpt_arg, d), 32);
        assert_eq!(offset_of!(tpt_arg, list), 40);
        assert_eq!(offset_of!(tpt_arg, len), 48);
        assert_eq!(size_of::<tpt_arg>(), 56);
    }

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn input_spec_layout_matches_c() {
        assert_eq!(offset_of!(tpt_input_spec, name), 0);
        assert_eq!(offset_of!(tpt_input_spec, dtype), 8);
        assert_eq!(offset_of!(tpt_input_spec, shape), 16);
        assert_eq!(offset_of!(tpt_input_spec, ndim), 24);
        assert_eq!(size_of::<tpt_input_spec>(), 32);
        assert_eq!(size_of::<tpt_tower_fn>(), size_of::<usize>());
        assert_eq!(size_of::<tpt_feed_fn>(), size_of::<usize>());
    }

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn train_config_layout_matches_c() {
        // Checked against the header with offsetof.
        assert_eq!(offset_of!(tpt_train_config, version), 0);
        assert_eq!(offset_of!(tpt_train_config, options), 8);
        assert_eq!(offset_of!(tpt_train_config, model), 16);
        assert_eq!(offset_of!(tpt_train_config, input), 24);
        assert_eq!(offset_of!(tpt_train_config, callbacks), 32);
        assert_eq!(offset_of!(tpt_train_config, n_callbacks), 40);
        assert_eq!(offset_of!(tpt_train_config, monitors), 48);
        assert_eq!(offset_of!(tpt_train_config, n_monitors), 56);
        assert_eq!(offset_of!(tpt_train_config, init), 64);
        assert_eq!(offset_of!(tpt_train_config, init_user_data), 72);
        assert_eq!(offset_of!(tpt_train_config, dataflow), 80);
        assert_eq!(offset_of!(tpt_train_config, towers), 88);
        assert_eq!(offset_of!(tpt_train_config, distributed), 96);
        assert_eq!(offset_of!(tpt_train_config, input_options), 104);
        assert_eq!(size_of::<tpt_train_config>(), 112);
        assert_eq!(size_of::<tpt_init_fn>(), size_of::<usize>());
        let c = TPT_TRAIN_CONFIG_INIT;
        assert_eq!((c.version, c.n_callbacks, c.n_monitors), (5, 0, 0));
        assert!(c.options.is_null() && c.model.is_null() && c.input.is_null() && c.init.is_none());
        assert!(c.dataflow.is_null() && c.towers.is_null() && c.distributed.is_null() && c.input_options.is_null());
        assert!(c.callbacks.is_null() && c.monitors.is_null() && c.init_user_data.is_null());
    }

    #[test]
    fn towers_options_layout_matches_c() {
        // Same numbers as tests/abi/abi_layout.h.
        let p = size_of::<*const u8>();
        assert_eq!(offset_of!(tpt_towers_options, version), 0);
        assert_eq!(offset_of!(tpt_towers_options, strategy), 4);
        assert_eq!(offset_of!(tpt_towers_options, n_towers), 8);
        assert_eq!(offset_of!(tpt_towers_options, devices), 16);
        assert_eq!(offset_of!(tpt_towers_options, average), 16 + p);
        assert_eq!(offset_of!(tpt_towers_options, intra_op_threads), 20 + p);
        assert_eq!(offset_of!(tpt_towers_options, overlap), 24 + p);
        assert_eq!(offset_of!(tpt_towers_options, bucket_bytes), 24 + p + size_of::<usize>());
        assert_eq!(offset_of!(tpt_towers_options, average_scalars), 24 + p + 2 * size_of::<usize>());
        assert_eq!(size_of::<tpt_towers_options>(), 24 + p + 3 * size_of::<usize>());
        assert_eq!(
            (TPT_STRATEGY_SIMPLE, TPT_STRATEGY_REPLICATED, TPT_STRATEGY_PARAMETER_SERVER, TPT_STRATEGY_ASYNC),
            (0, 1, 2, 3)
        );
        let o = TPT_TOWERS_OPTIONS_INIT;
        assert_eq!(
            (o.version, o.strategy, o.n_towers, o.average, o.intra_op_threads, o.overlap, o.bucket_bytes),
            (3, TPT_STRATEGY_REPLICATED, 2, 1, 0, 1, 0)
        );
        assert_eq!(o.average_scalars, 0);
        assert!(o.devices.is_null());
    }

    #[test]
    fn towers_nulls_are_errors() {
        unsafe {
            // NULL trainer: an error, and the (NULL) input is taken.
            let st = tpt_trainer_set_towers(
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                &TPT_TOWERS_OPTIONS_INIT,
            );
            assert_eq!(tpt_status_code(st), TPT_ERR_INVALID_ARGUMENT);
            tpt_status_free(st);
        }
    }

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn distributed_options_layout_matches_c() {
        // Checked against the header with offsetof.
        assert_eq!(offset_of!(tpt_distributed_options, version), 0);
        assert_eq!(offset_of!(tpt_distributed_options, master_addr), 8);
        assert_eq!(offset_of!(tpt_distributed_options, master_port), 16);
        assert_eq!(offset_of!(tpt_distributed_options, world_size), 20);
        assert_eq!(offset_of!(tpt_distributed_options, rank), 24);
        assert_eq!(offset_of!(tpt_distributed_options, local_rank), 28);
        assert_eq!(offset_of!(tpt_distributed_options, timeout_ms), 32);
        assert_eq!(offset_of!(tpt_distributed_options, shard), 40);
        assert_eq!(offset_of!(tpt_distributed_options, average_scalars), 44);
        assert_eq!(size_of::<tpt_distributed_options>(), 48);
        let o = TPT_DISTRIBUTED_OPTIONS_INIT;
        assert_eq!(
            (o.version, o.master_port, o.world_size, o.rank, o.local_rank, o.timeout_ms, o.shard, o.average_scalars),
            (1, 0, 0, 0, 0, 0, 1, 0)
        );
        assert!(o.master_addr.is_null());
    }

    #[test]
    fn distributed_nulls_are_errors() {
        unsafe {
            // NULL trainer: an error, not a rendezvous.
            let st = tpt_trainer_set_distributed(std::ptr::null_mut(), &TPT_DISTRIBUTED_OPTIONS_INIT);
            assert_eq!(tpt_status_code(st), TPT_ERR_INVALID_ARGUMENT);
            tpt_status_free(st);
            let (mut rank, mut world_size) = (-1, -1);
            let st = tpt_trainer_rank(&mut rank, &mut world_size, std::ptr::null());
            assert_eq!(tpt_status_code(st), TPT_ERR_INVALID_ARGUMENT);
            tpt_status_free(st);
        }
    }

    #[test]
    fn train_op_and_gan_options_layout_matches_c() {
        // Same numbers as tests/abi/abi_layout.h.
        let p = size_of::<*const u8>();
        assert_eq!(offset_of!(tpt_train_op, version), 0);
        assert_eq!(offset_of!(tpt_train_op, name), 8);
        assert_eq!(offset_of!(tpt_train_op, cost), 8 + p);
        assert_eq!(offset_of!(tpt_train_op, scope), 8 + 2 * p);
        assert_eq!(offset_of!(tpt_train_op, optimizer), 8 + 3 * p);
        assert_eq!(size_of::<tpt_train_op>(), 8 + 4 * p);
        let o = TPT_TRAIN_OP_INIT;
        assert_eq!(o.version, 1);
        assert!(o.name.is_null() && o.cost.is_null() && o.scope.is_null() && o.optimizer.is_null());
        assert_eq!(offset_of!(tpt_gan_options, version), 0);
        assert_eq!(offset_of!(tpt_gan_options, separate), 4);
        assert_eq!(offset_of!(tpt_gan_options, d_period), 8);
        assert_eq!(offset_of!(tpt_gan_options, g_period), 16);
        assert_eq!(offset_of!(tpt_gan_options, g_op), 24);
        assert_eq!(offset_of!(tpt_gan_options, d_op), 24 + p);
        assert_eq!(offset_of!(tpt_gan_options, towers), 24 + 2 * p);
        assert_eq!(size_of::<tpt_gan_options>(), 24 + 3 * p);
        let g = TPT_GAN_OPTIONS_INIT;
        assert_eq!((g.version, g.separate, g.d_period, g.g_period), (2, 0, 1, 1));
        assert!(g.g_op.is_null() && g.d_op.is_null() && g.towers.is_null());
    }

    #[test]
    fn train_ops_nulls_are_errors() {
        unsafe {
            let st = tpt_model_add_train_op(std::ptr::null_mut(), &TPT_TRAIN_OP_INIT);
            assert_eq!(tpt_status_code(st), TPT_ERR_INVALID_ARGUMENT);
            tpt_status_free(st);
            let st = tpt_trainer_run_train_ops(std::ptr::null_mut(), std::ptr::null(), 0, 1);
            assert_eq!(tpt_status_code(st), TPT_ERR_INVALID_ARGUMENT);
            tpt_status_free(st);
            // NULL trainer: an error, and the (NULL) input is taken.
            let st = tpt_trainer_set_gan(
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                &TPT_GAN_OPTIONS_INIT,
            );
            assert_eq!(tpt_status_code(st), TPT_ERR_INVALID_ARGUMENT);
            tpt_status_free(st);
            let st = tpt_trainer_set_train_ops(std::ptr::null_mut(), std::ptr::null(), 0);
            assert_eq!(tpt_status_code(st), TPT_ERR_INVALID_ARGUMENT);
            tpt_status_free(st);
        }
    }

    #[test]
    fn image_grid_options_layout_matches_c() {
        // Checked against the header with offsetof.
        assert_eq!(offset_of!(tpt_image_grid_options, version), 0);
        assert_eq!(offset_of!(tpt_image_grid_options, columns), 4);
        assert_eq!(offset_of!(tpt_image_grid_options, padding), 8);
        assert_eq!(offset_of!(tpt_image_grid_options, low), 16);
        assert_eq!(offset_of!(tpt_image_grid_options, high), 24);
        assert_eq!(offset_of!(tpt_image_grid_options, pad_value), 32);
        assert_eq!(size_of::<tpt_image_grid_options>(), 40);
        let o = TPT_IMAGE_GRID_OPTIONS_INIT;
        assert_eq!((o.version, o.columns, o.padding), (1, 8, 2));
        assert_eq!((o.low, o.high, o.pad_value), (0.0, 0.0, 0.0));
    }

    #[test]
    fn image_nulls_are_errors() {
        unsafe {
            let st = tpt_image_grid(std::ptr::null_mut(), std::ptr::null(), std::ptr::null());
            assert_eq!(tpt_status_code(st), TPT_ERR_INVALID_ARGUMENT);
            tpt_status_free(st);
            let mut out = std::ptr::null_mut();
            let st = tpt_image_grid(&mut out, std::ptr::null(), &TPT_IMAGE_GRID_OPTIONS_INIT);
            assert_eq!(tpt_status_code(st), TPT_ERR_INVALID_ARGUMENT);
            assert!(out.is_null());
            tpt_status_free(st);
            let st = tpt_image_write_png(std::ptr::null(), std::ptr::null());
            assert_eq!(tpt_status_code(st), TPT_ERR_INVALID_ARGUMENT);
            tpt_status_free(st);
        }
    }

    #[test]
    fn data_parallel_inference_runner_nulls_are_errors() {
        unsafe {
            // No out, model, dataflow or inferencers: an error, not a crash.
            let st = tpt_inference_runner_data_parallel(
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null(),
                0,
                2,
            );
            assert_eq!(tpt_status_code(st), TPT_ERR_INVALID_ARGUMENT);
            tpt_status_free(st);
        }
    }

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn dataflow_structs_layout_matches_c() {
        // Checked against the header with offsetof.
        assert_eq!(offset_of!(tpt_dataflow_callbacks, version), 0);
        assert_eq!(offset_of!(tpt_dataflow_callbacks, next), 8);
        assert_eq!(offset_of!(tpt_dataflow_callbacks, reset), 16);
        assert_eq!(offset_of!(tpt_dataflow_callbacks, size), 24);
        assert_eq!(offset_of!(tpt_dataflow_callbacks, save), 32);
        assert_eq!(offset_of!(tpt_dataflow_callbacks, restore), 40);
        assert_eq!(size_of::<tpt_dataflow_callbacks>(), 48);
        assert_eq!(offset_of!(tpt_parallel_map_options, n_threads), 4);
        assert_eq!(offset_of!(tpt_parallel_map_options, buffer_size), 8);
        assert_eq!(offset_of!(tpt_parallel_map_options, ordered), 12);
        assert_eq!(offset_of!(tpt_parallel_map_options, strict), 16);
        assert_eq!(size_of::<tpt_parallel_map_options>(), 20);
        assert_eq!(offset_of!(tpt_augmentor, version), 0);
        assert_eq!(offset_of!(tpt_augmentor, kind), 4);
        assert_eq!(offset_of!(tpt_augmentor, scale), 8);
        assert_eq!(offset_of!(tpt_augmentor, mean), 16);
        assert_eq!(offset_of!(tpt_augmentor, std), 24);
        assert_eq!(offset_of!(tpt_augmentor, n_channels), 32);
        assert_eq!(offset_of!(tpt_augmentor, height), 40);
        assert_eq!(offset_of!(tpt_augmentor, width), 48);
        assert_eq!(offset_of!(tpt_augmentor, padding), 56);
        assert_eq!(offset_of!(tpt_augmentor, probability), 64);
        assert_eq!(size_of::<tpt_augmentor>(), 72);
        assert_eq!(offset_of!(tpt_input_options, kind), 4);
        assert_eq!(offset_of!(tpt_input_options, capacity), 8);
        assert_eq!(offset_of!(tpt_input_options, repeat), 16);
        assert_eq!(size_of::<tpt_input_options>(), 24);
        let a = TPT_AUGMENTOR_INIT;
        assert_eq!((a.version, a.kind, a.scale, a.probability), (1, TPT_AUGMENT_TO_FLOAT, 1.0, 0.5));
        assert!(a.mean.is_null() && a.std.is_null() && a.n_channels == 0 && a.height == 0);
        let p = TPT_PARALLEL_MAP_OPTIONS_INIT;
        assert_eq!((p.version, p.n_threads, p.buffer_size, p.ordered, p.strict), (1, 2, 200, 0, 0));
        let i = TPT_INPUT_OPTIONS_INIT;
        assert_eq!((i.version, i.kind, i.capacity, i.repeat), (1, TPT_INPUT_QUEUE, 50, 1));
        let c = TPT_DATAFLOW_CALLBACKS_INIT;
        assert!(c.version == 2 && c.next.is_none() && c.reset.is_none() && c.size.is_none());
        assert!(c.save.is_none() && c.restore.is_none());
    }

    #[test]
    fn dataflow_nulls_are_errors() {
        unsafe {
            let mut out = std::ptr::null_mut();
            let st = tpt_dataflow_batch(&mut out, std::ptr::null_mut(), 2, 0);
            assert_eq!(tpt_status_code(st), TPT_ERR_INVALID_ARGUMENT);
            assert!(out.is_null());
            tpt_status_free(st);
            assert_eq!(tpt_datapoint_size(std::ptr::null()), 0);
            tpt_dataflow_free(std::ptr::null_mut());
            tpt_datapoint_free(std::ptr::null_mut());
        }
    }

    #[test]
    fn dataflow_callbacks_save_and_restore_come_together() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static DESTROYED: AtomicUsize = AtomicUsize::new(0);
        unsafe extern "C" fn next(_: *mut tpt_datapoint, _: *mut c_void) -> *mut tpt_status {
            tpt_status_new(TPT_STOP, b"end\0".as_ptr().cast())
        }
        unsafe extern "C" fn save(_: *mut *mut tpt_tensor, _: *mut c_void) -> *mut tpt_status {
            std::ptr::null_mut()
        }
        unsafe extern "C" fn restore(_: *const tpt_tensor, _: *mut c_void) -> *mut tpt_status {
            std::ptr::null_mut()
        }
        unsafe extern "C" fn destroy(_: *mut c_void) {
            DESTROYED.fetch_add(1, Ordering::SeqCst);
        }
        unsafe {
            // One without the other: refused, and user_data destroyed at once.
            for (s, r) in [(Some(save as _), None), (None, Some(restore as _))] {
                let mut c = TPT_DATAFLOW_CALLBACKS_INIT;
                c.next = Some(next);
                c.save = s;
                c.restore = r;
                let mut out = std::ptr::null_mut();
                let before = DESTROYED.load(Ordering::SeqCst);
                let st = tpt_dataflow_from_callbacks(&mut out, &c, std::ptr::null_mut(), Some(destroy));
                assert_eq!(tpt_status_code(st), TPT_ERR_INVALID_ARGUMENT);
                assert!(out.is_null());
                tpt_status_free(st);
                assert_eq!(DESTROYED.load(Ordering::SeqCst), before + 1);
            }
            // Both, and (a version 1 struct) the version 2 fields unread.
            for version in [2, 1] {
                let mut c = TPT_DATAFLOW_CALLBACKS_INIT;
                c.version = version;
                c.next = Some(next);
                c.save = Some(save);
                if version == 2 {
                    c.restore = Some(restore);
                }
                let mut out = std::ptr::null_mut();
                let st = tpt_dataflow_from_callbacks(&mut out, &c, std::ptr::null_mut(), Some(destroy));
                assert!(st.is_null(), "version {version}");
                tpt_dataflow_free(out);
            }
        }
    }

    #[test]
    fn launch_train_without_a_config_is_an_error() {
        unsafe {
            let st = tpt_launch_train(std::ptr::null());
            assert_eq!(tpt_status_code(st), TPT_ERR_INVALID_ARGUMENT);
            tpt_status_free(st);
            let mut out = std::ptr::null_mut();
            let st = tpt_trainer_from_config(&mut out, std::ptr::null());
            assert_eq!(tpt_status_code(st), TPT_ERR_INVALID_ARGUMENT);
            assert!(out.is_null());
            tpt_status_free(st);
        }
    }

    #[test]
    fn variable_options_layout_matches_c() {
        assert_eq!(offset_of!(tpt_variable_options, version), 0);
        assert_eq!(offset_of!(tpt_variable_options, dtype), 4);
        assert_eq!(offset_of!(tpt_variable_options, init), 8);
        assert_eq!(offset_of!(tpt_variable_options, trainable), 12);
        assert_eq!(offset_of!(tpt_variable_options, a), 16);
        assert_eq!(offset_of!(tpt_variable_options, b), 24);
        assert_eq!(size_of::<tpt_variable_options>(), 32);
    }

    #[test]
    fn torchscript_param_layout_matches_c() {
        let p = size_of::<*const u8>();
        assert_eq!(offset_of!(tpt_torchscript_param, name), 0);
        assert_eq!(offset_of!(tpt_torchscript_param, shape), p);
        assert_eq!(offset_of!(tpt_torchscript_param, ndim), 2 * p);
        assert_eq!(offset_of!(tpt_torchscript_param, options), 2 * p + size_of::<usize>());
        assert_eq!(size_of::<tpt_torchscript_param>(), 3 * p + size_of::<usize>());
    }

    #[test]
    fn layer_options_layout_matches_c() {
        assert_eq!(offset_of!(tpt_layer_options, version), 0);
        assert_eq!(offset_of!(tpt_layer_options, use_bias), 4);
        assert_eq!(offset_of!(tpt_layer_options, activation), 8);
        assert_eq!(offset_of!(tpt_layer_options, alpha), 16);
        assert_eq!(offset_of!(tpt_layer_options, kernel_init), 24);
        assert_eq!(offset_of!(tpt_layer_options, bias_init), 28);
        assert_eq!(offset_of!(tpt_layer_options, kernel), 32);
        assert_eq!(offset_of!(tpt_layer_options, stride), 48);
        assert_eq!(offset_of!(tpt_layer_options, dilation), 64);
        assert_eq!(offset_of!(tpt_layer_options, groups), 80);
        assert_eq!(offset_of!(tpt_layer_options, padding), 88);
        assert_eq!(size_of::<tpt_layer_options>(), 96);
    }

    #[test]
    fn model_init_constants_match_the_header_defaults() {
        let v = TPT_VARIABLE_OPTIONS_INIT;
        assert_eq!(
            (v.version, v.dtype, v.init, v.trainable, v.a, v.b),
            (1, TPT_DTYPE_F32, TPT_INIT_GLOROT_UNIFORM, 1, 0.0, 0.0)
        );
        let l = TPT_LAYER_OPTIONS_INIT;
        assert_eq!((l.version, l.use_bias, l.activation, l.alpha), (1, 1, TPT_ACT_NONE, 0.2));
        assert_eq!((l.kernel_init, l.bias_init), (TPT_INIT_HE_NORMAL, TPT_INIT_ZEROS));
        assert_eq!(
            (l.kernel, l.stride, l.dilation, l.groups, l.padding),
            ([3, 3], [1, 1], [1, 1], 1, TPT_PADDING_SAME)
        );
        let a = TPT_ARG_ZERO;
        assert!(a.kind == TPT_ARG_NONE && a.name.is_null() && a.tensor.is_null() && a.list.is_null());
    }

    #[test]
    fn init_constants_match_the_header_defaults() {
        let o = TPT_TRAINER_OPTIONS_INIT;
        assert_eq!((o.version, o.is_chief, o.starting_epoch, o.max_epoch, o.steps_per_epoch), (7, 1, 1, 99999999, -1));
        assert_eq!((o.scalar_history, o.summary_period, o.auto_resume, o.stop_on_signals), (1000, 0, 0, 0));
        assert_eq!((o.precision, o.continue_stopped), (TPT_PRECISION_FP32, 0));
        let l = o.loss_scaling;
        assert_eq!((l.mode, l.init_scale, l.growth_factor), (TPT_LOSS_SCALING_AUTO, 65536.0, 2.0));
        assert_eq!((l.backoff_factor, l.growth_interval), (0.5, 2000));
        assert!(o.logdir.is_null());
        assert_eq!((o.logdir_action, o.progress), (TPT_LOGDIR_REFUSE, TPT_PROGRESS_AUTO));
        assert_eq!((o.console, o.default_callbacks, o.default_monitors), (1, 1, 1));
        let p = TPT_PREDICTOR_OPTIONS_INIT;
        assert_eq!((p.version, p.n_input_names), (1, 0));
        assert!(p.input_names.is_null() && p.checkpoint.is_null());
        let d = TPT_CALLBACK_DESC_INIT;
        assert_eq!((d.version, d.events, d.chief_only), (2, 0, 1));
        assert!(d.name.is_null() && d.fn_.is_none() && d.user_data.is_null() && d.destroy.is_none());
        assert!(d.save.is_none() && d.restore.is_none());
        let m = TPT_MODEL_SAVER_OPTIONS_INIT;
        assert_eq!(
            (m.version, m.max_to_keep, m.keep_every_n_hours, m.every_k_steps, m.every_k_epochs),
            (1, 10, 0.5, 0, 1)
        );
        let r = TPT_RESTORE_OPTIONS_INIT;
        assert_eq!(
            (r.version, r.ignore_missing, r.ignore_unexpected, r.ignore_shape_mismatch, r.n_name_map),
            (1, 0, 1, 0, 0)
        );
        assert_eq!(TPT_EVENT_ALL, 0x7ff);
    }

    #[test]
    fn trainer_codes_have_names() {
        unsafe {
            assert_eq!(std::ffi::CStr::from_ptr(tpt_code_name(TPT_ERR_NOT_FOUND)).to_str(), Ok("TPT_ERR_NOT_FOUND"));
            assert_eq!(std::ffi::CStr::from_ptr(tpt_code_name(TPT_STOP)).to_str(), Ok("TPT_STOP"));
            assert_eq!(std::ffi::CStr::from_ptr(tpt_code_name(TPT_ERR_TIMEOUT)).to_str(), Ok("TPT_ERR_TIMEOUT"));
        }
    }
}
