/* The misuse suite's classes of careless and hostile calls (issue 12), each
 * with the outcome docs/ownership.md promises. Every function here is one
 * case, run in a forked child by misuse_main.c: returning non-zero, a crash,
 * a sanitizer report or a hang fails it. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "misuse_classes.h"
#include "misuse_common.h"

/* ======================================================================
 * 1. Freeing from inside. A trainer freed from its own run, from every
 *    site: misuse_matrix.c. */

/* A dataflow freed from inside its own callbacks: the handle goes at once,
 * the dataflow when the running call returns. */
static tpt_dataflow *g_df;
static int g_next_calls;

static tpt_status *src_next(tpt_datapoint *dp, void *ud) {
  (void)ud;
  if (++g_next_calls == 2) tpt_dataflow_free(g_df);
  if (g_next_calls > 5) return tpt_status_new(TPT_STOP, "end");
  return tpt_datapoint_set(dp, 0, mk_tensor());
}

static int free_dataflow_in_next(void) {
  tpt_dataflow_callbacks cbs = TPT_DATAFLOW_CALLBACKS_INIT;
  cbs.next = src_next;
  CHECK(tpt_dataflow_from_callbacks(&g_df, &cbs, NULL, NULL) == NULL);
  tpt_datapoint *dp = mk_datapoint();
  CHECK(tpt_dataflow_next(g_df, dp) == NULL);
  CHECK(tpt_dataflow_next(g_df, dp) == NULL); /* frees g_df inside; the call completes */
  CHECK(tpt_datapoint_size(dp) == 1);
  return 0;
}

static tpt_dataflow *g_root;
static tpt_status *map_frees_root(tpt_datapoint *dp, void *ud) {
  (void)dp, (void)ud;
  tpt_dataflow_free(g_root);
  tpt_datapoint_free(dp); /* lent by the library: a no-op */
  return NULL;
}

static int free_root_in_map(void) {
  tpt_dataflow *src = mk_dataflow();
  CHECK(tpt_dataflow_map(&g_root, src, map_frees_root, NULL, NULL) == NULL);
  tpt_dataflow_free(src);
  tpt_datapoint *dp = mk_datapoint();
  CHECK(tpt_dataflow_next(g_root, dp) == NULL);
  CHECK(tpt_datapoint_size(dp) == 1);
  return 0;
}

/* A source's reset callback that frees its dataflow. */
static tpt_status *reset_frees(uint64_t seed, void *ud) {
  (void)seed, (void)ud;
  tpt_dataflow_free(g_df);
  return NULL;
}

static int free_dataflow_in_reset(void) {
  tpt_dataflow_callbacks cbs = TPT_DATAFLOW_CALLBACKS_INIT;
  cbs.next = src_next;
  cbs.reset = reset_frees;
  CHECK(tpt_dataflow_from_callbacks(&g_df, &cbs, NULL, NULL) == NULL);
  CHECK(tpt_dataflow_reset_state(g_df) == NULL); /* frees g_df inside; the call completes */
  return 0;
}

/* A parallel map's function, on a worker thread, frees the pipeline's root
 * while the consumer waits in tpt_dataflow_next. */
static int g_map_calls;
static tpt_status *worker_frees_root(tpt_datapoint *dp, void *ud) {
  (void)dp, (void)ud;
  if (__atomic_fetch_add(&g_map_calls, 1, __ATOMIC_SEQ_CST) == 0) tpt_dataflow_free(g_root);
  return NULL;
}

static int free_root_in_parallel_map(void) {
  tpt_dataflow *src = mk_dataflow();
  tpt_parallel_map_options o = TPT_PARALLEL_MAP_OPTIONS_INIT;
  o.n_threads = 2;
  CHECK(tpt_dataflow_parallel_map(&g_root, src, worker_frees_root, NULL, NULL, &o) == NULL);
  tpt_dataflow_free(src);
  tpt_datapoint *dp = mk_datapoint();
  CHECK(tpt_dataflow_next(g_root, dp) == NULL); /* the workers stop when it returns */
  CHECK(tpt_datapoint_size(dp) == 1);
  return 0;
}

/* A model freed from its own tower function, during the build and during
 * inference: the model lives until the call returns. */
static tpt_model *g_model;
static tpt_status *tower_frees_model(tpt_tower *tw, const tpt_tensor *const *in, size_t n, void *ud) {
  (void)ud, (void)n;
  tpt_model_free(g_model);
  g_model = NULL;
  tpt_tensor_free((tpt_tensor *)in[0]); /* lent: a no-op */
  tpt_tensor *y = NULL;
  tpt_status *st = tpt_layer_fc(&y, tw, "fc", in[0], 2, NULL);
  if (!st) st = tpt_tower_set_output(tw, "y", y);
  return st;
}

static int free_model_in_build(void) {
  g_model = mk_model_with(tower_frees_model);
  CHECK(g_model != NULL);
  CHECK(tpt_model_build(g_model) == NULL);
  return 0;
}

static int free_model_in_infer(void) {
  tpt_model *m = mk_model_with(tower_frees_model);
  CHECK(m != NULL);
  g_model = NULL; /* the build frees nothing */
  CHECK(tpt_model_build(m) == NULL);
  g_model = m;    /* inference frees the caller's only handle from inside */
  tpt_tensor *x = mk_tensor(), *y = NULL;
  const tpt_tensor *ins[] = {x};
  const char *names[] = {"y"};
  CHECK(tpt_model_infer(&y, m, ins, 1, names, 1) == NULL);
  int64_t numel = 0;
  CHECK(tpt_tensor_numel(&numel, y) == NULL && numel == 4);
  return 0;
}

/* ======================================================================
 * 2. Re-entrant calls: a clear error, never a hang. */

typedef enum { RE_BUILD, RE_INFER, RE_VARIABLE } reentry;
static reentry g_re;
static tpt_model *g_self;
static int g_re_ok;

static tpt_status *reentrant_tower(tpt_tower *tw, const tpt_tensor *const *in, size_t n, void *ud) {
  (void)n, (void)ud;
  tpt_tensor *y = NULL;
  tpt_status *st = tpt_layer_fc(&y, tw, "fc", in[0], 2, NULL);
  if (st) return st;
  if (g_re == RE_BUILD)
    g_re_ok = is_error(tpt_model_build(g_self), TPT_ERR_STATE, "inside this model's own tower function");
  if (g_re == RE_INFER) {
    tpt_tensor *o = NULL;
    const char *names[] = {"y"};
    g_re_ok = is_error(tpt_model_infer(&o, g_self, in, 1, names, 1), TPT_ERR_STATE, "inside this model's own tower");
  }
  if (g_re == RE_VARIABLE) { /* during the build: the variable exists already, no lock is taken */
    tpt_tensor *w = NULL;
    tpt_status *v = tpt_model_variable(&w, g_self, "fc/W");
    g_re_ok = v == NULL && w != NULL;
    if (v) tpt_status_free(v);
  }
  return tpt_tower_set_output(tw, "y", y);
}

static int reentrant(reentry r, int via_infer) {
  g_re = r;
  g_self = mk_model_with(reentrant_tower);
  CHECK(g_self != NULL);
  if (via_infer) {
    tpt_tensor *x = mk_tensor(), *y = NULL;
    const tpt_tensor *ins[] = {x};
    const char *names[] = {"y"};
    g_re = RE_VARIABLE; /* the build inside infer */
    CHECK(tpt_model_build(g_self) == NULL);
    g_re = r;
    CHECK(tpt_model_infer(&y, g_self, ins, 1, names, 1) == NULL);
  } else {
    CHECK(tpt_model_build(g_self) == NULL);
  }
  CHECK(g_re_ok);
  return 0;
}

static int reenter_build_from_build(void) { return reentrant(RE_BUILD, 0); }
static int reenter_infer_from_build(void) { return reentrant(RE_INFER, 0); }
static int reenter_variable_from_build(void) { return reentrant(RE_VARIABLE, 0); }
static int reenter_infer_from_infer(void) { return reentrant(RE_INFER, 1); }

/* A hooked step's function that starts another, which would recurse without
 * end: each nested call is refused, and global_step counts run_steps. */
static int g_depth, g_nested = 1;
static tpt_status *nesting_step(tpt_trainer *t, void *ud) {
  (void)ud;
  ++g_depth;
  tpt_status *st = tpt_trainer_hooked_step(t, nesting_step, NULL);
  if (!is_error(st, TPT_ERR_STATE, "hooked steps do not nest")) g_nested = 0;
  return NULL;
}

static tpt_status *nesting_run_step(tpt_trainer *t, void *ud) {
  (void)ud;
  return tpt_trainer_hooked_step(t, nesting_step, NULL);
}

static int nested_hooked_step(void) {
  tpt_trainer *t = mk_quiet_trainer(2);
  CHECK(tpt_trainer_set_run_step(t, nesting_run_step, NULL, NULL) == NULL);
  CHECK(tpt_trainer_run(t) == NULL);
  CHECK(g_nested);
  int64_t gs = 0;
  CHECK(tpt_trainer_global_step(&gs, t) == NULL);
  CHECK(gs == 6); /* one per run_step, not two */
  CHECK(g_depth == 6);
  tpt_trainer_free(t);
  return 0;
}

static int32_t always(tpt_trainer *t, void *ud) {
  (void)t, (void)ud;
  return 1;
}

/* ======================================================================
 * 6. Error paths keep the promises: *out is NULL after every failure. */

static int wrappers_clear_out(void) {
  tpt_callback *out = SENTINEL;
  tpt_callback *dead = (tpt_callback *)junk(); /* not a live callback */
  CHECK(is_error(tpt_callback_periodic(&out, dead, 1, 0), TPT_ERR_INVALID_ARGUMENT, "inner"));
  CHECK(out == NULL);
  out = SENTINEL;
  CHECK(is_error(tpt_callback_periodic_trigger(&out, dead, 1, 0, 0), TPT_ERR_INVALID_ARGUMENT, "inner"));
  CHECK(out == NULL);
  out = SENTINEL;
  CHECK(is_error(tpt_callback_enable_if(&out, dead, always, NULL, NULL), TPT_ERR_INVALID_ARGUMENT, "inner"));
  CHECK(out == NULL);
  tpt_tensor *t = SENTINEL;
  CHECK(is_error(tpt_tensor_from_dlpack(&t, NULL), TPT_ERR_INVALID_ARGUMENT, "src"));
  CHECK(t == NULL);
  return 0;
}

/* ======================================================================
 * 7. Messages that help. */

static tpt_status *cb_empty_error(tpt_trainer *t, tpt_event ev, const tpt_record *r, void *ud) {
  (void)t, (void)r, (void)ud;
  return ev == TPT_EVENT_BEFORE_EPOCH ? tpt_status_new(TPT_ERR_CALLBACK, "") : NULL;
}

static int empty_message_names_callback(void) {
  tpt_trainer *t = mk_quiet_trainer(0);
  tpt_callback_desc d = TPT_CALLBACK_DESC_INIT;
  d.events = TPT_EVENT_BEFORE_EPOCH;
  d.fn = cb_empty_error;
  d.name = "silent";
  tpt_callback *cb = NULL;
  CHECK(tpt_callback_new(&cb, &d) == NULL && tpt_trainer_add_callback(t, cb) == NULL);
  CHECK(is_error(tpt_trainer_run(t), TPT_ERR_CALLBACK,
                 "callback 'silent' returned TPT_ERR_CALLBACK without a message at before_epoch"));
  tpt_trainer_free(t);
  return 0;
}

static int config_errors_name_the_field(void) {
  tpt_callback *cbs[] = {mk_callback(), (tpt_callback *)junk()};
  tpt_input *in = mk_input();
  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
  o.steps_per_epoch = 1;
  tpt_train_config c = TPT_TRAIN_CONFIG_INIT;
  c.options = &o;
  c.model = mk_model();
  c.input = in;
  c.callbacks = cbs;
  c.n_callbacks = 2;
  tpt_trainer *t = SENTINEL;
  CHECK(is_error(tpt_trainer_from_config(&t, &c), TPT_ERR_INVALID_ARGUMENT,
                 "tpt_trainer_from_config: config->callbacks[1]: argument 'callback' is not a live tpt_callback"));
  CHECK(t == NULL);
  tpt_trainer_options bad = TPT_TRAINER_OPTIONS_INIT;
  bad.starting_epoch = 0;
  c.options = &bad;
  c.input = mk_input();
  c.callbacks = NULL;
  c.n_callbacks = 0;
  CHECK(is_error(tpt_trainer_from_config(&t, &c), TPT_ERR_INVALID_ARGUMENT, "tpt_trainer_from_config: config->options: "));
  return 0;
}

/* ======================================================================
 * 3. Restored states are untrusted input: random bytes, bit flips of real
 *    states, truncations and splices either fail (and leave the dataflow as
 *    it was: its next datapoints equal those of an untouched twin) or give
 *    a dataflow that iterates without crashing. */

typedef tpt_dataflow *(*pipeline_fn)(void);

static tpt_tensor *rows(int64_t n, int64_t width) {
  float *v = malloc((size_t)(n * width) * sizeof *v);
  for (int64_t i = 0; i < n * width; ++i) v[i] = (float)i;
  const int64_t shape[] = {n, width};
  tpt_tensor *t = NULL;
  tpt_status *st = tpt_tensor_from_data(&t, v, (size_t)(n * width) * sizeof *v, shape, 2, NULL);
  free(v);
  if (st) _exit(3);
  return t;
}

static tpt_dataflow *chain(tpt_status *st, tpt_dataflow *made) {
  if (st) {
    fprintf(stderr, "pipeline: %s\n", tpt_status_message(st));
    _exit(3);
  }
  return made;
}

static tpt_dataflow *p_shuffled_batches(void) {
  const tpt_tensor *t[] = {rows(37, 3), rows(37, 1)};
  tpt_dataflow *a = NULL, *b = NULL, *c = NULL;
  chain(tpt_dataflow_from_tensors(&a, t, 2, 1), a);
  chain(tpt_dataflow_batch(&b, a, 4, 1), b);
  chain(tpt_dataflow_repeat(&c, b, 3), c);
  tpt_dataflow_free(a), tpt_dataflow_free(b);
  return c;
}

static tpt_dataflow *p_concat_cache(void) {
  const tpt_tensor *t1[] = {rows(11, 2)}, *t2[] = {rows(7, 2)};
  tpt_dataflow *a = NULL, *b = NULL, *c = NULL, *d = NULL, *e = NULL;
  chain(tpt_dataflow_from_tensors(&a, t1, 1, 1), a);
  chain(tpt_dataflow_from_tensors(&b, t2, 1, 0), b);
  tpt_dataflow *both[] = {a, b};
  chain(tpt_dataflow_concat(&c, both, 2), c);
  chain(tpt_dataflow_cache(&d, c, 1), d);
  chain(tpt_dataflow_fixed_size(&e, d, 13, 1), e);
  tpt_dataflow_free(a), tpt_dataflow_free(b), tpt_dataflow_free(c), tpt_dataflow_free(d);
  return e;
}

static tpt_dataflow *p_local_shuffle(void) {
  const tpt_tensor *t[] = {rows(23, 2)};
  tpt_dataflow *a = NULL, *b = NULL, *c = NULL;
  chain(tpt_dataflow_from_tensors(&a, t, 1, 1), a);
  chain(tpt_dataflow_local_shuffle(&b, a, 5, 2), b);
  chain(tpt_dataflow_batch(&c, b, 3, 0), c);
  tpt_dataflow_free(a), tpt_dataflow_free(b);
  return c;
}

static tpt_status *add_one(tpt_datapoint *dp, void *ud) {
  (void)ud;
  tpt_tensor *t = NULL, *u = NULL;
  tpt_status *st = tpt_datapoint_get(&t, dp, 0);
  if (!st) st = tpt_op_add_scalar(&u, t, 1.0);
  if (!st) st = tpt_datapoint_set(dp, 0, u);
  tpt_tensor_free(t), tpt_tensor_free(u);
  return st;
}

static tpt_dataflow *p_join_select_prefetch(void) {
  const tpt_tensor *t1[] = {rows(19, 2)}, *t2[] = {rows(17, 1)};
  tpt_dataflow *a = NULL, *b = NULL, *j = NULL, *s = NULL, *m = NULL, *p = NULL, *f = NULL, *r = NULL;
  chain(tpt_dataflow_from_tensors(&a, t1, 1, 1), a);
  chain(tpt_dataflow_from_tensors(&b, t2, 1, 1), b);
  tpt_dataflow *both[] = {a, b};
  chain(tpt_dataflow_join(&j, both, 2), j);
  const size_t idx[] = {1, 0, 1};
  chain(tpt_dataflow_select(&s, j, idx, 3), s);
  tpt_parallel_map_options o = TPT_PARALLEL_MAP_OPTIONS_INIT;
  o.ordered = 1; /* deterministic, so the twin comparison holds */
  o.strict = 1;
  chain(tpt_dataflow_parallel_map(&m, s, add_one, NULL, NULL, &o), m);
  chain(tpt_dataflow_prefetch(&p, m, 4), p);
  chain(tpt_dataflow_fixed_size(&f, p, 9, 0), f);
  chain(tpt_dataflow_repeat(&r, f, -1), r);
  tpt_dataflow_free(a), tpt_dataflow_free(b), tpt_dataflow_free(j), tpt_dataflow_free(s);
  tpt_dataflow_free(m), tpt_dataflow_free(p), tpt_dataflow_free(f);
  return r;
}

/* Fills `out` with the flattened first component of the next datapoint;
 * returns its element count, -1 at the end of a pass, -2 on an error. */
static int64_t next_values(tpt_dataflow *df, float *out, int64_t cap) {
  tpt_datapoint *dp = NULL;
  if (tpt_datapoint_new(&dp)) return -2;
  tpt_status *st = tpt_dataflow_next(df, dp);
  int64_t n = -2;
  if (st) {
    n = tpt_status_code(st) == TPT_STOP ? -1 : -2;
    tpt_status_free(st);
  } else {
    tpt_tensor *t = NULL;
    if (!tpt_datapoint_get(&t, dp, 0) && !tpt_tensor_numel(&n, t)) {
      if (n > cap) n = cap;
      tpt_tensor *f = NULL;
      if (tpt_tensor_to(&f, t, NULL, TPT_DTYPE_F32) || tpt_tensor_copy_to(out, (size_t)n * sizeof *out, f)) n = -2;
      tpt_tensor_free(f);
    }
    tpt_tensor_free(t);
  }
  tpt_datapoint_free(dp);
  return n;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return rng;
}

static tpt_tensor *bytes_tensor(const uint8_t *b, size_t n) {
  const int64_t shape[] = {(int64_t)n};
  tpt_tensor_options o = TPT_TENSOR_OPTIONS_INIT;
  o.dtype = TPT_DTYPE_U8;
  tpt_tensor *t = NULL;
  if (tpt_tensor_from_data(&t, n ? b : (const void *)"", n, shape, 1, &o)) _exit(3);
  return t;
}

/* One pipeline kind, `rounds` forged states. */
static int fuzz_states(pipeline_fn make, int rounds) {
  /* a real state, taken mid-pass */
  tpt_dataflow *src = make();
  float buf[64];
  for (int i = 0; i < 5; ++i) CHECK(next_values(src, buf, 64) >= 0);
  tpt_tensor *state = NULL;
  CHECK(tpt_dataflow_get_state(&state, src) == NULL);
  int64_t n = 0;
  CHECK(tpt_tensor_numel(&n, state) == NULL && n > 0);
  uint8_t *real = malloc((size_t)n), *forged = malloc((size_t)n * 2 + 64);
  CHECK(tpt_tensor_copy_to(real, (size_t)n, state) == NULL);
  /* the pipeline under test and its untouched twin, both 2 datapoints in */
  tpt_dataflow *df = make(), *twin = make();
  for (int i = 0; i < 2; ++i) CHECK(next_values(df, buf, 64) >= 0 && next_values(twin, buf, 64) >= 0);
  int refused = 0, accepted = 0;
  for (int r = 0; r < rounds; ++r) {
    size_t len = (size_t)n;
    memcpy(forged, real, (size_t)n);
    switch (r % 5) {
      case 0: /* one bit */
        forged[rnd() % len] ^= (uint8_t)(1u << (rnd() % 8));
        break;
      case 1: /* a few random bytes */
        for (int k = 0; k < 4; ++k) forged[rnd() % len] = (uint8_t)rnd();
        break;
      case 2: /* truncated */
        len = rnd() % len;
        break;
      case 3: /* random bytes of a random length */
        len = rnd() % ((size_t)n * 2 + 1);
        for (size_t k = 0; k < len; ++k) forged[k] = (uint8_t)rnd();
        break;
      case 4: { /* a 64-bit field set to an extreme value */
        size_t at = len >= 8 ? rnd() % (len - 7) : 0;
        uint64_t v = (rnd() & 1) ? UINT64_MAX - (rnd() % 4) : (uint64_t)1 << (rnd() % 64);
        if (len >= 8) memcpy(forged + at, &v, 8);
        break;
      }
    }
    tpt_tensor *t = bytes_tensor(forged, len);
    tpt_status *st = tpt_dataflow_set_state(df, t);
    tpt_tensor_free(t);
    if (st) {
      CHECK(tpt_status_message(st)[0] != '\0');
      tpt_status_free(st);
      ++refused;
      /* left as it was: the same next datapoint as the twin */
      float a[64], b[64];
      int64_t na = next_values(df, a, 64), nb = next_values(twin, b, 64);
      CHECK(na == nb);
      if (na > 0) CHECK(memcmp(a, b, (size_t)na * sizeof *a) == 0);
      if (na == -1) { /* both at a pass end: the next pass starts in both */
      }
    } else {
      ++accepted;
      /* accepted: it must iterate, whatever it gives */
      for (int k = 0; k < 40; ++k)
        if (next_values(df, buf, 64) == -2) break;
      tpt_dataflow_free(df);
      tpt_dataflow_free(twin);
      df = make(), twin = make();
      for (int i = 0; i < 2; ++i) CHECK(next_values(df, buf, 64) >= 0 && next_values(twin, buf, 64) >= 0);
    }
  }
  fprintf(stderr, "# %d forged states: %d refused, %d accepted\n", rounds, refused, accepted);
  return 0;
}

static int fuzz_shuffled_batches(void) { return fuzz_states(p_shuffled_batches, 1500); }
static int fuzz_concat_cache(void) { return fuzz_states(p_concat_cache, 1500); }
static int fuzz_local_shuffle(void) { return fuzz_states(p_local_shuffle, 1500); }
static int fuzz_join_select_prefetch(void) { return fuzz_states(p_join_select_prefetch, 600); }

/* A state of one pipeline shape given to another: refused, nothing changed. */
static int state_of_another_shape(void) {
  tpt_dataflow *a = p_shuffled_batches(), *b = p_concat_cache();
  float buf[64];
  CHECK(next_values(a, buf, 64) >= 0);
  tpt_tensor *st = NULL;
  CHECK(tpt_dataflow_get_state(&st, a) == NULL);
  CHECK(is_error(tpt_dataflow_set_state(b, st), TPT_ERR_INVALID_ARGUMENT, "state"));
  return 0;
}

/* Checkpoint files: a real one (a run that saves at after_train), then
 * forged copies: bit flips, truncations, random spans, appended bytes. Each
 * goes to tpt_trainer_resume and tpt_model_restore: an error with a message
 * or success, never a crash; a refused restore leaves the model as it was. */
static tpt_status *save_at_end(tpt_trainer *t, tpt_event ev, const tpt_record *r, void *ud) {
  (void)r;
  return ev == TPT_EVENT_AFTER_TRAIN ? tpt_trainer_save_checkpoint(t, (const char *)ud) : NULL;
}

static uint64_t mix64(uint64_t h, const uint8_t *p) {
  uint64_t w;
  memcpy(&w, p, 8);
  h = (h ^ w) * 0x100000001b3ull;
  return h ^ (h >> 29);
}

/* Writes tptrain's trailer of `version` (docs/checkpoints.md's checksums)
 * after the `body` bytes of buf; returns the file's length. */
static size_t put_trailer(uint8_t *buf, size_t body, int version) {
  const uint64_t basis = 0xcbf29ce484222325ull;
  uint64_t h = basis, l = body;
  size_t k = 0;
  if (version == 1) {
    for (; k + 8 <= body; k += 8) h = mix64(h, buf + k);
  } else {
    uint64_t lane[4] = {basis, basis ^ 1, basis ^ 2, basis ^ 3};
    for (; k + 32 <= body; k += 32)
      for (int i = 0; i < 4; ++i) lane[i] = mix64(lane[i], buf + k + 8 * i);
    for (int i = 0; i < 4; ++i) {
      uint8_t le[8];
      memcpy(le, &lane[i], 8);
      h = mix64(h, le);
    }
  }
  for (; k < body; ++k) h = (h ^ buf[k]) * 0x100000001b3ull;
  memcpy(buf + body, version == 1 ? "TPTCKPT1" : "TPTCKPT2", 8), memcpy(buf + body + 8, &l, 8);
  memcpy(buf + body + 16, &h, 8);
  return body + 24;
}

static int fuzz_checkpoints(void) {
  char dir[] = "/tmp/tpt-misuse-ckXXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char real_path[128], forged_path[128];
  snprintf(real_path, sizeof real_path, "%s/real", dir);
  snprintf(forged_path, sizeof forged_path, "%s/forged", dir);
  tpt_trainer *t = mk_quiet_trainer(2);
  tpt_model *m = mk_model_with(cost_tower);
  tpt_callback_desc d = TPT_CALLBACK_DESC_INIT;
  d.events = TPT_EVENT_AFTER_TRAIN;
  d.fn = save_at_end;
  d.user_data = real_path;
  tpt_callback *cb = NULL;
  CHECK(tpt_callback_new(&cb, &d) == NULL && tpt_trainer_add_callback(t, cb) == NULL);
  CHECK(tpt_trainer_set_model(t, m, mk_input()) == NULL);
  CHECK(tpt_trainer_run(t) == NULL);
  FILE *f = fopen(real_path, "rb");
  CHECK(f != NULL);
  static uint8_t real[1 << 16], forged[(1 << 16) + 64];
  size_t n = fread(real, 1, sizeof real, f);
  fclose(f);
  CHECK(n > 0 && n < sizeof real);
  float before[3], after[3];
  tpt_tensor *w = NULL;
  CHECK(tpt_model_variable(&w, m, "fc/W") == NULL && tpt_tensor_copy_to(before, sizeof before, w) == NULL);
  int refused = 0, accepted = 0;
  const size_t zip = n - 24; /* the archive, before tptrain's 24-byte trailer */
  CHECK(memcmp(real + zip, "TPTCKPT2", 8) == 0);
  /* the file as written with either version's trailer (1: before 2026-11-29) is the same
     checkpoint: this test's checksums equal the library's */
  for (int version = 2; version >= 1; --version) {
    memcpy(forged, real, n);
    size_t len = put_trailer(forged, zip, version);
    CHECK(len == n && (version == 1 || memcmp(forged, real, n) == 0));
    f = fopen(forged_path, "wb");
    CHECK(f != NULL && fwrite(forged, 1, len, f) == len);
    fclose(f);
    CHECK(tpt_model_restore(NULL, m, forged_path, NULL) == NULL);
    tpt_trainer *fresh = mk_quiet_trainer(2);
    CHECK(tpt_trainer_resume(fresh, forged_path) == NULL);
    tpt_trainer_free(fresh);
  }
  for (int round = 0; round < 400; ++round) {
    size_t len = n;
    memcpy(forged, real, n);
    /* rounds 0-199 damage the file; 200-399 damage the archive and give it a
       valid trailer (a hostile file: the zip, pickle and field checks must
       hold on their own); every fourth of those drops the trailer (the
       torch.save reader's path) */
    size_t span_of = round < 200 ? n : zip;
    switch (round % 4) {
      case 0: for (int k = 0, flips = 1 + (int)(rnd() % 8); k < flips; ++k) forged[rnd() % span_of] ^= (uint8_t)(1u << (rnd() % 8)); break;
      case 1: len = rnd() % span_of; break;
      case 2: { size_t at = rnd() % span_of, span = 1 + rnd() % 64; for (size_t k = at; k < at + span && k < span_of; ++k) forged[k] = (uint8_t)rnd(); } break;
      case 3: if (round < 200) { for (size_t k = 0; k < 64; ++k) forged[n + k] = (uint8_t)rnd(); len = n + 1 + rnd() % 63; } else len = zip; break;
    }
    if (round >= 200 && round % 4 != 3) { /* a valid trailer for the damaged archive */
      size_t body = round % 4 == 1 ? len : zip;
      len = put_trailer(forged, body, 1 + (round / 4) % 2); /* either version, by turns */
    }
    f = fopen(forged_path, "wb");
    CHECK(f != NULL && fwrite(forged, 1, len, f) == len);
    fclose(f);
    tpt_trainer *fresh = mk_quiet_trainer(2);
    tpt_status *st = tpt_trainer_resume(fresh, forged_path);
    if (st) {
      CHECK(tpt_status_message(st)[0] != '\0');
      tpt_status_free(st);
      ++refused;
    } else {
      ++accepted;
    }
    tpt_trainer_free(fresh);
    st = tpt_model_restore(NULL, m, forged_path, NULL);
    if (st) {
      CHECK(tpt_status_message(st)[0] != '\0');
      tpt_status_free(st);
      CHECK(tpt_tensor_copy_to(after, sizeof after, w) == NULL);
      CHECK(memcmp(before, after, sizeof before) == 0); /* nothing changed */
    } else {
      CHECK(tpt_tensor_copy_to(before, sizeof before, w) == NULL);
    }
  }
  printf("# 400 forged checkpoints: %d refused, %d accepted\n", refused, accepted);
  unlink(real_path), unlink(forged_path), rmdir(dir);
  return 0;
}

/* ======================================================================
 * 4. Numbers in range, 5. pathological input to the parsers we call. */

static int accumulate_steps_out_of_range(void) {
  tpt_optimizer *o = mk_optimizer();
  CHECK(is_error(tpt_optimizer_set(o, "accumulate_steps", 1e30), TPT_ERR_INVALID_ARGUMENT,
                 "accumulate_steps must be an integer >= 1 and <= 1e9, got 1e+30"));
  CHECK(is_error(tpt_optimizer_set(o, "accumulate_steps", -3.5), TPT_ERR_INVALID_ARGUMENT, "got -3.5"));
  CHECK(tpt_optimizer_set(o, "accumulate_steps", 4) == NULL);
  return 0;
}

static const char *g_pattern;
static tpt_status *long_name_tower(tpt_tower *tw, const tpt_tensor *const *in, size_t n, void *ud) {
  (void)n, (void)ud;
  tpt_tensor *y = NULL, *l2 = NULL;
  tpt_status *st = tpt_layer_fc(&y, tw, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", in[0], 2, NULL);
  if (!st) st = tpt_regularize_l2(&l2, tw, g_pattern, 0.5);
  if (!st) st = tpt_tower_set_output(tw, "y", y);
  return st;
}

static int catastrophic_pattern_runs_fast(void) {
  g_pattern = "(a*)*b"; /* exponential for a backtracking matcher on 68 a's */
  tpt_model *m = mk_model_with(long_name_tower);
  CHECK(m != NULL);
  CHECK(tpt_model_build(m) == NULL);
  tpt_optimizer *o = mk_optimizer();
  CHECK(tpt_optimizer_scale_gradients(o, "(a|aa)*c", 2.0) == NULL);
  return 0;
}

static int hostile_patterns_refused(void) {
  char longp[400];
  memset(longp, 'a', sizeof longp - 1);
  longp[sizeof longp - 1] = '\0';
  tpt_optimizer *o = mk_optimizer();
  CHECK(is_error(tpt_optimizer_scale_gradients(o, longp, 2.0), TPT_ERR_INVALID_ARGUMENT, "399 characters; at most 256"));
  CHECK(is_error(tpt_optimizer_scale_gradients(o, "((((((((((((((((((((a))))))))))))))))))))", 2.0),
                 TPT_ERR_INVALID_ARGUMENT, "nests 20 groups"));
  CHECK(is_error(tpt_optimizer_scale_gradients(o, "((a{99}){99}){1000}", 2.0), TPT_ERR_INVALID_ARGUMENT,
                 "repeat count 1000 is over 100"));
  CHECK(is_error(tpt_optimizer_scale_gradients(o, "(a)\\1", 2.0), TPT_ERR_INVALID_ARGUMENT, "not a regular expression"));
  CHECK(is_error(tpt_optimizer_scale_gradients(o, "(", 2.0), TPT_ERR_INVALID_ARGUMENT, "not a regular expression"));
  return 0;
}

static int torchscript_compile(const char *source, tpt_status **st) {
  const int64_t shape[] = {-1, 3};
  tpt_input_spec spec[] = {{"x", TPT_DTYPE_F32, shape, 2}};
  tpt_model *m = SENTINEL;
  *st = tpt_model_from_torchscript_source(&m, source, NULL, 0, spec, 1);
  if (*st && m != NULL) return MISUSE_OUT_DANGLING;
  return 0;
}

static int torchscript_deep_brackets(void) {
  enum { N = 50000 };
  const char *head = "def forward(self, x):\n    return ";
  char *src = malloc(strlen(head) + 2 * N + 8);
  strcpy(src, head);
  char *p = src + strlen(head);
  for (int i = 0; i < N; ++i) *p++ = '(';
  *p++ = 'x';
  for (int i = 0; i < N; ++i) *p++ = ')';
  strcpy(p, "\n");
  tpt_status *st = NULL;
  CHECK(torchscript_compile(src, &st) == 0);
  CHECK(is_error(st, TPT_ERR_INVALID_ARGUMENT, "nests brackets more than 256 deep (line 2)"));
  return 0;
}

static int torchscript_deep_unary(void) {
  enum { N = 20000 };
  const char *head = "def forward(self, x):\n    return ";
  char *src = malloc(strlen(head) + 2 * N + 8);
  strcpy(src, head);
  char *p = src + strlen(head);
  for (int i = 0; i < N; ++i) *p++ = '-', *p++ = ' ';
  strcpy(p, "x\n");
  tpt_status *st = NULL;
  CHECK(torchscript_compile(src, &st) == 0); /* compiled or refused, on the compiler's big stack */
  if (st) {
    CHECK(tpt_status_message(st)[0] != '\0');
    tpt_status_free(st);
  }
  return 0;
}

static int validation_errors_name_the_runner(void) {
  tpt_model *m = mk_model_with(cost_tower);
  CHECK(m != NULL);
  const tpt_tensor *t[] = {rows(6, 5)}; /* width 5: the signature says 3 */
  tpt_dataflow *src = NULL, *batches = NULL;
  CHECK(tpt_dataflow_from_tensors(&src, t, 1, 0) == NULL);
  CHECK(tpt_dataflow_batch(&batches, src, 2, 0) == NULL);
  const char *names[] = {"cost"};
  tpt_callback *runner = NULL;
  CHECK(tpt_inference_runner_new(&runner, m, batches, names, 1) == NULL);
  tpt_trainer *tr = mk_quiet_trainer(1);
  CHECK(tr != NULL);
  CHECK(tpt_trainer_add_callback(tr, runner) == NULL);
  CHECK(tpt_trainer_set_model(tr, m, mk_input()) == NULL);
  CHECK(is_error(tpt_trainer_run(tr), TPT_ERR_INVALID_ARGUMENT, "InferenceRunner: batch 0 of its dataflow: input 'x'"));
  return 0;
}

/* A source whose next calls tpt_dataflow_next / get_state on its own
 * dataflow: TPT_ERR_STATE, not an endless recursion. */
static tpt_dataflow *g_self_df;
static int g_self_ok = 1, g_self_calls;
static tpt_status *src_reenters(tpt_datapoint *dp, void *ud) {
  (void)ud;
  if (++g_self_calls > 3) return tpt_status_new(TPT_STOP, "end");
  tpt_datapoint *inner = mk_datapoint();
  if (!is_error(tpt_dataflow_next(g_self_df, inner), TPT_ERR_STATE, "tpt_dataflow_next was called on a dataflow from inside its own callbacks"))
    g_self_ok = 0;
  tpt_tensor *st = NULL;
  if (!is_error(tpt_dataflow_get_state(&st, g_self_df), TPT_ERR_STATE, "not re-entrant")) g_self_ok = 0;
  if (!is_error(tpt_dataflow_reset_state(g_self_df), TPT_ERR_STATE, "not re-entrant")) g_self_ok = 0;
  tpt_datapoint_free(inner);
  return tpt_datapoint_set(dp, 0, mk_tensor());
}

static int dataflow_next_from_its_own_next(void) {
  tpt_dataflow_callbacks cbs = TPT_DATAFLOW_CALLBACKS_INIT;
  cbs.next = src_reenters;
  CHECK(tpt_dataflow_from_callbacks(&g_self_df, &cbs, NULL, NULL) == NULL);
  tpt_datapoint *dp = mk_datapoint();
  CHECK(tpt_dataflow_next(g_self_df, dp) == NULL);
  CHECK(tpt_dataflow_next(g_self_df, dp) == NULL);
  CHECK(g_self_ok);
  return 0;
}

/* ---- the residue of a sweep of hostile calls (issue 31) */

/* A shuffled cache's state, forged with its pass-order flag cleared while a
 * pass is under way: refused (its next() indexed an empty order before). */
static int forged_cache_order_flag(void) {
  const tpt_tensor *t[] = {rows(6, 1)};
  tpt_dataflow *src = NULL, *cache = NULL;
  CHECK(tpt_dataflow_from_tensors(&src, t, 1, 0) == NULL);
  CHECK(tpt_dataflow_cache(&cache, src, 1) == NULL);
  float buf[8];
  for (int i = 0; i < 6; ++i) CHECK(next_values(cache, buf, 8) >= 0);
  CHECK(next_values(cache, buf, 8) == -1); /* the first pass filled it */
  for (int i = 0; i < 2; ++i) CHECK(next_values(cache, buf, 8) >= 0);
  tpt_tensor *state = NULL;
  CHECK(tpt_dataflow_get_state(&state, cache) == NULL);
  int64_t n = 0;
  CHECK(tpt_tensor_numel(&n, state) == NULL && n >= 32);
  uint8_t *b = malloc((size_t)n);
  CHECK(tpt_tensor_copy_to(b, (size_t)n, state) == NULL);
  /* CacheData's own fields: filled 1, cached 6, position 2, ordered 1 */
  const uint64_t want[4] = {1, 6, 2, 1};
  int64_t at = -1;
  for (int64_t i = 0; i + 32 <= n && at < 0; ++i)
    if (memcmp(b + i, want, sizeof want) == 0) at = i;
  CHECK(at >= 0);
  memset(b + at + 24, 0, 8);
  tpt_tensor *forged = bytes_tensor(b, (size_t)n);
  CHECK(is_error(tpt_dataflow_set_state(cache, forged), TPT_ERR_INVALID_ARGUMENT, "without its order"));
  /* and the cache goes on as it was */
  for (int i = 0; i < 4; ++i) CHECK(next_values(cache, buf, 8) >= 0);
  CHECK(next_values(cache, buf, 8) == -1);
  return 0;
}

/* An init hook that frees the model it was lent, twice: a no-op each time. */
static tpt_status *free_lent_model(tpt_model *model, void *ud) {
  (void)ud;
  tpt_model_free(model);
  tpt_model_free(model);
  tpt_tensor *v = NULL;
  tpt_status *st = tpt_model_variable(&v, model, "fc/W"); /* still usable */
  tpt_tensor_free(v);
  return st;
}

static int init_hook_frees_its_model(void) {
  tpt_model *m = mk_model_with(cost_tower);
  tpt_trainer_options o = mk_quiet_options(2);
  tpt_train_config c = TPT_TRAIN_CONFIG_INIT;
  c.options = &o;
  c.model = m;
  c.input = mk_input();
  c.init = free_lent_model;
  CHECK(tpt_launch_train(&c) == NULL);
  tpt_tensor *v = NULL;
  CHECK(tpt_model_variable(&v, m, "fc/W") == NULL); /* the caller's handle is untouched */
  tpt_tensor_free(v);
  tpt_model_free(m);
  return 0;
}

/* Paths that are FIFOs (no writer: open() would wait forever), a directory
 * and a character device are refused at once by every reader. */
static int fifo_and_device_paths_refused(void) {
  char dir[] = "/tmp/tpt-misuse-fifo-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char fifo[64];
  snprintf(fifo, sizeof fifo, "%s/fifo", dir);
  CHECK(mkfifo(fifo, 0600) == 0);
  const char *paths[] = {fifo, dir, "/dev/zero"};
  for (int i = 0; i < 3; ++i) {
    const char *one[] = {paths[i]};
    tpt_dataflow *df = SENTINEL;
    CHECK(is_error(tpt_dataflow_from_idx(&df, one, 1, 0), TPT_ERR_IO, "not a regular file"));
    CHECK(df == NULL);
    if (i != 1) { /* a directory is where resume and restore look for an index */
      tpt_trainer *t = mk_trainer();
      CHECK(is_error(tpt_trainer_resume(t, paths[i]), TPT_ERR_IO, "not a regular file"));
      tpt_model *m = mk_model();
      size_t n = 0;
      CHECK(is_error(tpt_model_restore(&n, m, paths[i], NULL), TPT_ERR_IO, "not a regular file"));
    }
    const int64_t shape[] = {-1, 3};
    tpt_input_spec spec[] = {{"x", TPT_DTYPE_F32, shape, 2}};
    tpt_model *ts = SENTINEL;
    CHECK(is_error(tpt_model_from_torchscript(&ts, paths[i], spec, 1), TPT_ERR_IO, "not a regular file"));
  }
  unlink(fifo);
  rmdir(dir);
  return 0;
}

/* regularize_l2 and scale_gradients search every variable name: a name of
 * 200,000 characters is refused when the variable is made, so no search
 * runs over it. */
static tpt_status *huge_name_tower(tpt_tower *tw, const tpt_tensor *const *in, size_t n, void *ud) {
  (void)n, (void)ud;
  static char name[200001];
  memset(name, 'a', sizeof name - 1);
  tpt_tensor *y = NULL, *l2 = NULL;
  tpt_status *st = tpt_layer_fc(&y, tw, name, in[0], 2, NULL);
  if (!st) st = tpt_regularize_l2(&l2, tw, "(a*)*b", 0.5);
  if (!st) st = tpt_tower_set_output(tw, "y", y);
  return st;
}

static int huge_variable_name_refused(void) {
  tpt_model *m = mk_model_with(huge_name_tower);
  CHECK(is_error(tpt_model_build(m), TPT_ERR_INVALID_ARGUMENT, "characters; at most 1024"));
  return 0;
}

/* A map_component callback that gives back its lent input as the output:
 * an error of the pass, not every datapoint silently dropped. */
static tpt_status *give_back_input(tpt_tensor **out, const tpt_tensor *value, void *ud) {
  (void)ud;
  *out = (tpt_tensor *)value;
  return NULL;
}

static int map_component_returns_its_input(void) {
  const tpt_tensor *t[] = {rows(4, 2)};
  tpt_dataflow *src = NULL, *mapped = NULL;
  CHECK(tpt_dataflow_from_tensors(&src, t, 1, 0) == NULL);
  CHECK(tpt_dataflow_map_component(&mapped, src, 0, give_back_input, NULL, NULL) == NULL);
  tpt_datapoint *dp = mk_datapoint();
  CHECK(is_error(tpt_dataflow_next(mapped, dp), TPT_ERR_INVALID_ARGUMENT, "tpt_tensor_keep"));
  return 0;
}

/* ======================================================================
 * Enums out of range. A C caller can put any int32 in an enum field or
 * argument. Each one below, at -1, INT32_MIN and 1 << 30, is refused with
 * TPT_ERR_INVALID_ARGUMENT naming it (tpt_has_feature says 0); loading
 * such a value as the C++ enum before checking it would be undefined
 * behaviour, which the ASan + UBSan run of this suite reports. */
static const int32_t bad_enums[] = {-1, INT32_MIN, 1 << 30};

static tpt_layer_options g_bad_layer;
static tpt_variable_options g_bad_variable;

static tpt_status *bad_layer_tower(tpt_tower *tw, const tpt_tensor *const *in, size_t n, void *ud) {
  (void)n, (void)ud;
  tpt_tensor *y = NULL;
  return tpt_layer_fc(&y, tw, "fc", in[0], 1, &g_bad_layer);
}

static tpt_status *bad_variable_tower(tpt_tower *tw, const tpt_tensor *const *in, size_t n, void *ud) {
  (void)in, (void)n, (void)ud;
  const int64_t shape[] = {2};
  tpt_tensor *v = NULL;
  return tpt_tower_variable(&v, tw, "v", shape, 1, &g_bad_variable);
}

#define ENUM_REFUSED(call, fragment) CHECK(is_error((call), TPT_ERR_INVALID_ARGUMENT, (fragment)))

static int enums_out_of_range_refused(void) {
  for (size_t k = 0; k < sizeof bad_enums / sizeof bad_enums[0]; ++k) {
    const int32_t bad = bad_enums[k];
    tpt_trainer *t = NULL;
    tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
    o.logdir_action = (tpt_logdir_action)bad;
    ENUM_REFUSED(tpt_trainer_new(&t, &o), "options->logdir_action");
    o = (tpt_trainer_options)TPT_TRAINER_OPTIONS_INIT;
    o.progress = (tpt_progress)bad;
    ENUM_REFUSED(tpt_trainer_new(&t, &o), "options->progress");
    o = (tpt_trainer_options)TPT_TRAINER_OPTIONS_INIT;
    o.precision = (tpt_precision)bad;
    ENUM_REFUSED(tpt_trainer_new(&t, &o), "options->precision");
    o = (tpt_trainer_options)TPT_TRAINER_OPTIONS_INIT;
    o.loss_scaling.mode = (tpt_loss_scaling_mode)bad;
    ENUM_REFUSED(tpt_trainer_new(&t, &o), "options->loss_scaling.mode");

    tpt_trainer *tr = mk_quiet_trainer(1);
    tpt_towers_options to = TPT_TOWERS_OPTIONS_INIT;
    to.strategy = (tpt_strategy)bad;
    tpt_model *m = mk_model();
    ENUM_REFUSED(tpt_trainer_set_towers(tr, m, mk_input(), &to), "strategy");
    tpt_trainer_free(tr);

    for (size_t f = 0; f < 4; ++f) {
      static const char *const fields[] = {"activation", "kernel_init", "bias_init", "padding"};
      g_bad_layer = (tpt_layer_options)TPT_LAYER_OPTIONS_INIT;
      tpt_layer_options *o = &g_bad_layer;
      if (f == 0) o->activation = (tpt_activation)bad;
      if (f == 1) o->kernel_init = (tpt_init)bad;
      if (f == 2) o->bias_init = (tpt_init)bad;
      if (f == 3) o->padding = (tpt_padding)bad;
      tpt_model *lm = mk_model_with(bad_layer_tower);
      ENUM_REFUSED(tpt_model_build(lm), fields[f]);
      tpt_model_free(lm);
    }

    g_bad_variable = (tpt_variable_options)TPT_VARIABLE_OPTIONS_INIT;
    g_bad_variable.dtype = (tpt_dtype)bad;
    tpt_model *vm = mk_model_with(bad_variable_tower);
    ENUM_REFUSED(tpt_model_build(vm), "dtype");
    tpt_model_free(vm);
    g_bad_variable = (tpt_variable_options)TPT_VARIABLE_OPTIONS_INIT;
    g_bad_variable.init = (tpt_init)bad;
    vm = mk_model_with(bad_variable_tower);
    ENUM_REFUSED(tpt_model_build(vm), "init");
    tpt_model_free(vm);

    tpt_tensor *x = NULL;
    tpt_tensor_options tens = TPT_TENSOR_OPTIONS_INIT;
    tens.dtype = (tpt_dtype)bad;
    const float data[2] = {1, 2};
    const int64_t two[] = {2};
    ENUM_REFUSED(tpt_tensor_from_data(&x, data, sizeof data, two, 1, &tens), "dtype");
    tpt_tensor *img = NULL;
    const float pixels[16] = {0};
    const int64_t nchw[] = {1, 1, 4, 4};
    CHECK(tpt_tensor_from_data(&img, pixels, sizeof pixels, nchw, 4, NULL) == NULL);
    ENUM_REFUSED(tpt_tensor_to(&x, img, NULL, (tpt_dtype)bad), "dtype");
    ENUM_REFUSED(tpt_layer_max_pool(&x, img, 2, 2, (tpt_padding)bad), "padding");
    ENUM_REFUSED(tpt_layer_avg_pool(&x, img, 2, 2, (tpt_padding)bad), "padding");
    CHECK(tpt_dtype_size((tpt_dtype)bad) == 0);

    const int64_t shape[] = {-1, 3};
    tpt_input_spec spec[] = {{"x", (tpt_dtype)bad, shape, 2}};
    tpt_model *sm = NULL;
    ENUM_REFUSED(tpt_model_new(&sm, spec, 1, cost_tower, NULL, NULL), "dtype");

    tpt_input *in = NULL;
    tpt_input_options io = TPT_INPUT_OPTIONS_INIT;
    io.kind = (tpt_input_kind)bad;
    tpt_dataflow *df = mk_dataflow();
    ENUM_REFUSED(tpt_input_from_dataflow(&in, df, &io), "kind");

    tpt_dataflow *aug = NULL;
    tpt_augmentor a = TPT_AUGMENTOR_INIT;
    a.kind = (tpt_augment_kind)bad;
    ENUM_REFUSED(tpt_dataflow_augment(&aug, df, 0, &a, 1, 0), "kind");
    tpt_dataflow_free(df);

    tpt_arg arg[] = {{0}};
    arg[0].kind = (tpt_arg_kind)bad;
    size_t n_out = 0;
    ENUM_REFUSED(tpt_op_call(&x, 1, &n_out, "aten::relu", NULL, arg, 1), "kind");

    ENUM_REFUSED(tpt_tensor_scope_set_mode((tpt_scope_mode)bad), "mode");
    CHECK(tpt_has_feature((tpt_feature)bad) == 0);
    tpt_tensor_free(img);
    tpt_model_free(m);
  }
  return 0;
}

const class_case class_cases[] = {
    {"free a dataflow from its own next callback", free_dataflow_in_next, 60},
    {"free a pipeline's root from its map callback (and the lent datapoint)", free_root_in_map, 60},
    {"free a dataflow from its own reset callback", free_dataflow_in_reset, 60},
    {"free a pipeline's root from a parallel map's worker thread, mid-next", free_root_in_parallel_map, 60},
    {"free a model from its tower function during the build", free_model_in_build, 60},
    {"free a model from its tower function during inference", free_model_in_infer, 60},
    {"tpt_model_build from the model's own build", reenter_build_from_build, 30},
    {"tpt_model_infer from the model's own build", reenter_infer_from_build, 30},
    {"tpt_model_variable from the model's own build", reenter_variable_from_build, 30},
    {"tpt_model_infer from the model's own inference", reenter_infer_from_infer, 30},
    {"tpt_dataflow_next, get_state and reset_state from the dataflow's own next", dataflow_next_from_its_own_next, 30},
    {"tpt_trainer_hooked_step nested in a hooked step's function", nested_hooked_step, 30},
    {"wrappers and tpt_tensor_from_dlpack set *out to NULL on failure", wrappers_clear_out, 30},
    {"fuzzed states of shuffled batches, repeated (bit flips, bytes, truncations, extremes)", fuzz_shuffled_batches, 120},
    {"fuzzed states of a concat of sources, cached, fixed size", fuzz_concat_cache, 120},
    {"fuzzed states of a local shuffle, batched", fuzz_local_shuffle, 120},
    {"fuzzed states of join, select, parallel map, prefetch, fixed size, repeat", fuzz_join_select_prefetch, 180},
    {"a state of another pipeline shape", state_of_another_shape, 30},
    {"forged checkpoint files (bit flips, truncations, random spans, appended bytes; damaged archives with valid trailers) to resume and restore", fuzz_checkpoints, 240},
    {"accumulate_steps = 1e30 and other out-of-range numbers", accumulate_steps_out_of_range, 30},
    {"a catastrophic regex over a long variable name runs in polynomial time", catastrophic_pattern_runs_fast, 30},
    {"enormous, deeply nested, huge-count and back-reference regexes are refused", hostile_patterns_refused, 30},
    {"TorchScript source nested 50,000 brackets deep", torchscript_deep_brackets, 60},
    {"TorchScript source with 20,000 unary operators in a row", torchscript_deep_unary, 120},
    {"a callback's error without a message names the callback and the event", empty_message_names_callback, 30},
    {"tpt_trainer_from_config's errors name the config field", config_errors_name_the_field, 30},
    {"a validation batch's error names the inference runner's dataflow", validation_errors_name_the_runner, 60},
    {"a shuffled cache's state forged without its pass order is refused", forged_cache_order_flag, 30},
    {"an init hook that frees its lent model twice", init_hook_frees_its_model, 60},
    {"FIFO, directory and device paths are refused by every reader without blocking", fifo_and_device_paths_refused, 30},
    {"a variable name of 200,000 characters is refused before any pattern searches it", huge_variable_name_refused, 20},
    {"a map_component callback that gives back its lent input", map_component_returns_its_input, 30},
    {"every enum field and argument at -1, INT32_MIN and 1 << 30 is refused (read as an integer first)", enums_out_of_range_refused, 60},
};
const size_t n_class_cases = sizeof class_cases / sizeof class_cases[0];
