/*
 * tptrain/dataflow.h: tpt_dataflow: the DataFlow library (sources,
 * combinators, augmentation, seeds and state) and tpt_datapoint.
 *
 * Part of the C ABI; include <tptrain.h>, which includes every module.
 */
#ifndef TPTRAIN_DATAFLOW_H
#define TPTRAIN_DATAFLOW_H

#include "model.h"

TPT_BEGIN_DECL

/* ------------------------------------------------------------------------ */
/* Dataflows: the input pipeline                                             */
/*                                                                           */
/* tensorpack's DataFlow library. A dataflow yields datapoints, each a list  */
/* of components (tensors; a scalar is a 0-d tensor). It is iterated in      */
/* passes: tpt_dataflow_next gives the pass's datapoints, then TPT_STOP once */
/* at its end; the next call starts another pass. A dataflow may be finite   */
/* or infinite and may know its size (datapoints per pass).                  */
/*                                                                           */
/* Handles are shared: a combinator keeps its own reference to the dataflows */
/* it reads, so the caller may free its handles at any time. A dataflow has  */
/* one consumer: using it in a second combinator or input, or iterating it   */
/* directly once it has one, is an error (tensorpack's "not reentrant").     */
/*                                                                           */
/* Randomness is seeded: tpt_dataflow_set_seed on the outermost dataflow     */
/* seeds every random part of the pipeline (each gets its own stream, mixed  */
/* from the seed and its place in the pipeline); without it the seed comes  */
/* from LibTorch's default generator (tpt_manual_seed), so a seeded program */
/* repeats its data. The random state can be saved and restored.            */
/*                                                                           */
/* Threads: a dataflow is iterated by one thread at a time. Callbacks of    */
/* sources run on the thread that iterates; map callbacks of                */
/* tpt_dataflow_parallel_map run on its worker threads, several at once.     */
/* Threads a dataflow starts (parallel map, prefetch, the queue input) are   */
/* joined when it is reset again, when its consumer stops, or when its last */
/* reference goes; none outlives it.                                         */
/* ------------------------------------------------------------------------ */

/* ---- Datapoints --------------------------------------------------------- */

/* An empty datapoint (for tpt_dataflow_next). The caller owns it. */
TPT_API TPT_NODISCARD tpt_status *tpt_datapoint_new(tpt_datapoint **out);
/* NULL is a no-op, and so is a datapoint the library lent to a callback (the
 * `dp` of a source's next or of a map): it belongs to the call. */
TPT_API void tpt_datapoint_free(tpt_datapoint *dp);
/* The number of components (0 for NULL). */
TPT_API size_t tpt_datapoint_size(const tpt_datapoint *dp);
/* A new handle on component `index` (the caller frees it). */
TPT_API TPT_NODISCARD tpt_status *tpt_datapoint_get(tpt_tensor **out, const tpt_datapoint *dp,
                                                    size_t index);
/* Sets component `index` to `value` (shared, not copied); index ==
 * tpt_datapoint_size appends. */
TPT_API TPT_NODISCARD tpt_status *tpt_datapoint_set(tpt_datapoint *dp, size_t index,
                                                    const tpt_tensor *value);
/* Keeps the first `size` components (0 empties it: a map callback that
 * leaves the datapoint empty drops it). */
TPT_API TPT_NODISCARD tpt_status *tpt_datapoint_truncate(tpt_datapoint *dp, size_t size);
/* In a map function (tpt_dataflow_map, tpt_dataflow_parallel_map): a seed
 * for this datapoint's randomness (a random crop, a noise), drawn in input
 * order from the map's generator, which tpt_dataflow_set_seed seeds and
 * checkpoints save, as the augmentors' are: the results do not depend on
 * n_threads or on the order the workers finish in, and a resumed run draws
 * the seeds the uninterrupted one would. Seed a generator of your own with
 * it. TPT_ERR_STATE for a datapoint that is not a map function's. */
TPT_API TPT_NODISCARD tpt_status *tpt_datapoint_seed(uint64_t *out, const tpt_datapoint *dp);

/* ---- Sources ------------------------------------------------------------ */

/* A dataflow from C callbacks. next fills `dp` (empty on entry) with the
 * next datapoint, or returns TPT_STOP at the end of the pass (any other
 * status is an error that ends the consumer with its message). reset (may
 * be NULL) is called by every reset of the dataflow with the seed the source
 * should use for its randomness; a restart of the pass by a consumer (join,
 * fixed_size without keep_state) does not reach the callbacks, the source
 * goes on where it was. size (may be NULL: unknown) returns the datapoints
 * per pass, or -1.
 *
 * Version 2 adds the source's position, for tpt_dataflow_get_state. save
 * puts the source's state after the last datapoint next gave (or at the
 * start of a pass) into *out as a new 1-d u8 tensor (the library takes it).
 * It runs on the thread that iterates the source: after every datapoint
 * when a thread reads ahead of the pipeline's consumer (prefetch, a parallel
 * map, a queue input), so keep it cheap (a position and a generator state).
 * restore gets what save made (valid during the call), right after reset
 * at the reset that continues from a saved state. Both NULL: restored, the
 * source is reset with the seed it had and starts its first pass again; a
 * state with a position is refused by a source without restore.
 * Initialise with TPT_DATAFLOW_CALLBACKS_INIT. */
#define TPT_DATAFLOW_CALLBACKS_VERSION 2
typedef struct tpt_dataflow_callbacks {
  uint32_t version; /* TPT_DATAFLOW_CALLBACKS_VERSION (1: without save and restore) */
  tpt_status *(*next)(tpt_datapoint *dp, void *user_data);
  tpt_status *(*reset)(uint64_t seed, void *user_data);
  int64_t (*size)(void *user_data);
  /* Version 2 */
  tpt_status *(*save)(tpt_tensor **out, void *user_data);
  tpt_status *(*restore)(const tpt_tensor *state, void *user_data);
} tpt_dataflow_callbacks;
#define TPT_DATAFLOW_CALLBACKS_INIT { TPT_DATAFLOW_CALLBACKS_VERSION, NULL, NULL, NULL, NULL, NULL }

/* The library owns user_data (destroy exactly once: when the dataflow's
 * last reference goes, or at once on failure). */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_from_callbacks(tpt_dataflow **out,
                                                              const tpt_dataflow_callbacks *callbacks,
                                                              void *user_data,
                                                              void (*destroy)(void *user_data));

/* Rows of in-memory tensors (dimension 0): datapoint i is (tensors[0][i],
 * tensors[1][i], ...), in order or reshuffled every pass. Host arrays come in
 * through tpt_tensor_from_blob. The tensors are shared, not copied. */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_from_tensors(tpt_dataflow **out,
                                                            const tpt_tensor *const *tensors,
                                                            size_t n_tensors, int32_t shuffle);

/* Rows of IDX files (the MNIST format; gzip-compressed when the name ends in
 * .gz): datapoint i is (row i of paths[0], row i of paths[1], ...) in the
 * files' element types (u8 for MNIST). The files are read at this call; a
 * missing, truncated, wrong-magic or wrong-size file, or files with
 * different row counts, give TPT_ERR_IO or TPT_ERR_INVALID_ARGUMENT naming
 * the file. */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_from_idx(tpt_dataflow **out,
                                                        const char *const *paths, size_t n_paths,
                                                        int32_t shuffle);

/* MNIST or Fashion-MNIST (the same files) in `dir`: split "train" (60,000)
 * or "test" (10,000). Datapoints (image f32 [1, 28, 28] in [0, 1], label
 * i64 scalar). */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_mnist(tpt_dataflow **out, const char *dir,
                                                     const char *split, int32_t shuffle);

/* Decodes file `path` (number `index` in the list) into `dp` (empty on
 * entry). Called on the thread that iterates, or on worker threads when
 * n_threads > 0 (several at once). */
typedef tpt_status *(*tpt_decode_fn)(tpt_datapoint *dp, const char *path, size_t index,
                                     void *user_data);

/* A list of files decoded by `decode` (the paths are copied), in order or
 * shuffled every pass; with n_threads > 0 they are decoded by that many
 * threads, in order. The library owns user_data. */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_from_files(tpt_dataflow **out,
                                                          const char *const *paths, size_t n_paths,
                                                          int32_t shuffle, int32_t n_threads,
                                                          tpt_decode_fn decode, void *user_data,
                                                          void (*destroy)(void *user_data));

/* `size` datapoints per pass of the given shapes and dtypes (names are
 * ignored; -1 is not allowed), for benchmarks: uniform in [low, high)
 * (integers: [low, high) rounded down), new every datapoint when `random`,
 * else one constant datapoint repeated. */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_fake(tpt_dataflow **out,
                                                    const tpt_input_spec *components,
                                                    size_t n_components, int64_t size,
                                                    int32_t random, double low, double high);

/* ---- Combinators -------------------------------------------------------- */

/* Stacks `batch_size` datapoints into one along a new dimension 0 (each
 * component; shapes and dtypes must agree, else an error naming both
 * shapes). A short last batch is dropped, or emitted when `remainder`. */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_batch(tpt_dataflow **out, tpt_dataflow *df,
                                                     int64_t batch_size, int32_t remainder);

/* A map callback: changes `dp` in place (set, truncate, append). Leaving it
 * empty drops the datapoint. An error status ends the consumer with its
 * message. Only a source's next callback may return TPT_STOP; from a map,
 * component, decode or reset callback it is TPT_ERR_CALLBACK. */
typedef tpt_status *(*tpt_map_fn)(tpt_datapoint *dp, void *user_data);

/* Applies `fn` to every datapoint on the iterating thread. The library owns
 * user_data. */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_map(tpt_dataflow **out, tpt_dataflow *df,
                                                   tpt_map_fn fn, void *user_data,
                                                   void (*destroy)(void *user_data));

/* Replaces component `index` with what `fn` makes of it (*out: a new
 * tensor that the library takes, or NULL to drop the datapoint). `value` is
 * lent for the call: setting *out to it is an error of the pass
 * (TPT_ERR_INVALID_ARGUMENT); tpt_tensor_keep(out, value) keeps it as is. */
typedef tpt_status *(*tpt_component_fn)(tpt_tensor **out, const tpt_tensor *value,
                                        void *user_data);
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_map_component(tpt_dataflow **out,
                                                             tpt_dataflow *df, size_t index,
                                                             tpt_component_fn fn, void *user_data,
                                                             void (*destroy)(void *user_data));

/* Options of tpt_dataflow_parallel_map. Initialise with
 * TPT_PARALLEL_MAP_OPTIONS_INIT. */
#define TPT_PARALLEL_MAP_OPTIONS_VERSION 1
typedef struct tpt_parallel_map_options {
  uint32_t version;     /* TPT_PARALLEL_MAP_OPTIONS_VERSION */
  int32_t n_threads;    /* >= 1; default 2 */
  int32_t buffer_size;  /* datapoints in flight; default 200 */
  int32_t ordered;      /* nonzero: outputs in input order (default 0) */
  int32_t strict;       /* nonzero: each pass maps exactly the input's pass
                           (the buffer drains at its end); 0 (default): the
                           input repeats forever and passes blend */
} tpt_parallel_map_options;
#define TPT_PARALLEL_MAP_OPTIONS_INIT { TPT_PARALLEL_MAP_OPTIONS_VERSION, 2, 200, 0, 0 }

/* tensorpack's MultiThreadMapData: `fn` runs on n_threads worker threads.
 * In strict mode a drop is an error. Workers start at reset. */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_parallel_map(tpt_dataflow **out, tpt_dataflow *df,
                                                            tpt_map_fn fn, void *user_data,
                                                            void (*destroy)(void *user_data),
                                                            const tpt_parallel_map_options *options);

/* Iterates `df` on a background thread, up to `capacity` datapoints ahead
 * (tensorpack's PrefetchData with one worker; passes are kept apart). */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_prefetch(tpt_dataflow **out, tpt_dataflow *df,
                                                        int64_t capacity);

/* Shuffles within a buffer of `buffer_size` datapoints, each read
 * `n_reuse` times (>= 1); reads `df` over and over, so it is infinite; its
 * size is size(df) * n_reuse (tensorpack's LocallyShuffleData). */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_local_shuffle(tpt_dataflow **out,
                                                             tpt_dataflow *df,
                                                             int64_t buffer_size, int64_t n_reuse);

/* Keeps the first pass of `df` in memory and replays it, reshuffled every
 * pass when `shuffle` (tensorpack's CacheData). */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_cache(tpt_dataflow **out, tpt_dataflow *df,
                                                     int32_t shuffle);

/* `n` passes of `df` as one pass (n = -1: forever, infinite). */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_repeat(tpt_dataflow **out, tpt_dataflow *df,
                                                      int64_t n);

/* Exactly `size` datapoints per pass, restarting `df` when it ends; with
 * keep_state the next pass goes on where this one stopped, else restarts. */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_fixed_size(tpt_dataflow **out, tpt_dataflow *df,
                                                          int64_t size, int32_t keep_state);

/* Every count-th datapoint, from the index-th on (0 <= index < count): a
 * rank's share of the data of a distributed job (index: the rank, count: the
 * world size; tpt_trainer_rank, or torchrun's RANK and WORLD_SIZE), put near
 * the source so that the expensive steps after it run on the share only
 * (then the job's distributed options say shard = 0). Each datapoint given
 * reads `count` of df's and drops all but one, so every share's pipeline is
 * in the same state; a pass's last datapoints that do not make `count` are
 * dropped. Its size is df's / count. */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_shard(tpt_dataflow **out, tpt_dataflow *df,
                                                     int64_t index, int64_t count);

/* One after the other. */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_concat(tpt_dataflow **out,
                                                      tpt_dataflow *const *dfs, size_t n);

/* Side by side: the components of dfs[0], then of dfs[1], ...; the pass
 * ends with the shortest. */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_join(tpt_dataflow **out, tpt_dataflow *const *dfs,
                                                    size_t n);

/* Components indices[0], indices[1], ... in that order (repeats allowed). */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_select(tpt_dataflow **out, tpt_dataflow *df,
                                                      const size_t *indices, size_t n);

/* ---- Image augmentation ------------------------------------------------- */

/* Image augmentors, applied in order to an image component of shape
 * [C, H, W] or [H, W] (any real dtype; TO_FLOAT converts). */
typedef enum tpt_augment_kind {
  TPT_AUGMENT_TO_FLOAT = 1,    /* f32, times `scale` (e.g. 1/255) */
  TPT_AUGMENT_NORMALIZE = 2,   /* (x - mean[c]) / std[c]; n_channels 1 applies to all */
  TPT_AUGMENT_RANDOM_CROP = 3, /* pad by `padding` (zeros), crop height x width at random */
  TPT_AUGMENT_FLIP = 4,        /* flip horizontally with `probability` */
  TPT_AUGMENT_FORCE32 = 0x7fffffff
} tpt_augment_kind;

/* One augmentor: the fields its kind uses (see tpt_augment_kind).
 * Initialise with TPT_AUGMENTOR_INIT (a to-float by 1, the defaults of the
 * other fields) and set the kind and its fields. Every element of one array
 * has the same version; a later version only appends fields. */
#define TPT_AUGMENTOR_VERSION 1
typedef struct tpt_augmentor {
  uint32_t version;   /* TPT_AUGMENTOR_VERSION; 0 (the struct before it had one) is refused */
  tpt_augment_kind kind;
  double scale;       /* TO_FLOAT: default 1 */
  const double *mean; /* NORMALIZE: n_channels values, copied */
  const double *std;  /* NORMALIZE: n_channels values, copied */
  size_t n_channels;
  int64_t height, width, padding; /* RANDOM_CROP */
  double probability; /* FLIP: default 0.5 */
} tpt_augmentor;
#define TPT_AUGMENTOR_INIT { TPT_AUGMENTOR_VERSION, TPT_AUGMENT_TO_FLOAT, 1.0, NULL, NULL, 0, 0, 0, 0, 0.5 }

/* Applies `augmentors` to component `index` of every datapoint (tensorpack's
 * AugmentImageComponent). Each datapoint's randomness is drawn in input
 * order, so the result does not depend on n_threads: 0 augments on the
 * iterating thread, n > 0 on n worker threads (in order). */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_augment(tpt_dataflow **out, tpt_dataflow *df,
                                                       size_t index,
                                                       const tpt_augmentor *augmentors,
                                                       size_t n_augmentors, int32_t n_threads);

/* ---- Iterating, seeds and state ----------------------------------------- */

/* Prepares `df` (and what it reads) for iteration: seeds its randomness
 * (from the seed, or the restored state), starts its threads, starts a new
 * pass. tensorpack calls it once per consumer; here a later reset starts
 * over (threads are joined and restarted). tpt_dataflow_next resets a
 * dataflow that never was. Not while another thread iterates it. */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_reset_state(tpt_dataflow *df);

/* The next datapoint of the pass into `dp` (its previous components are
 * replaced); TPT_STOP at the end of the pass. */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_next(tpt_dataflow *df, tpt_datapoint *dp);

/* Datapoints per pass, or -1 when unknown. As tensorpack's len(), it is the
 * nominal size: an infinite dataflow made from a finite one (local shuffle,
 * non-strict parallel map) reports its input's size, and a map that drops
 * datapoints reports what it reads. */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_size(int64_t *out, const tpt_dataflow *df);

/* Seeds the pipeline (see above) at its next reset. Only the seed of the
 * dataflow that is reset (the outermost) counts. */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_set_seed(tpt_dataflow *df, uint64_t seed);

/* The state of the pipeline as of the last datapoint tpt_dataflow_next gave
 * (every generator, the seeds of the last reset, the position in the pass),
 * as a u8 tensor to save with a checkpoint. Threads that read ahead do not
 * change it: prefetch and parallel maps keep a snapshot of their input's
 * state with each datapoint. Call it from the thread that iterates the
 * dataflow, between next calls, or while nothing iterates it; a dataflow
 * read by another dataflow or an input is an error (take the state of the
 * outermost). Not saved:
 * a local shuffle's buffer (restored, it refills from where its input was),
 * the order of an unordered parallel map, and the position of a C source
 * without save and restore (restored, it is reset with the seed it had). */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_get_state(tpt_tensor **out, const tpt_dataflow *df);

/* Restores a state from tpt_dataflow_get_state of a pipeline of the same
 * shape; the next reset continues from it instead of reseeding: the next
 * datapoint is the one after the last one given when the state was taken,
 * mid-pass or not. An error (nothing changed) if the shape differs, the
 * state is damaged, or the dataflow is read by another dataflow or an input
 * (set the state before you give it to one). */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_set_state(tpt_dataflow *df, const tpt_tensor *state);

/* Drops the caller's reference. NULL is a no-op. */
TPT_API void tpt_dataflow_free(tpt_dataflow *df);

TPT_END_DECL

#endif /* TPTRAIN_DATAFLOW_H */
