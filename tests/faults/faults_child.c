/* The storage-fault suite's training (tests/faults/test_faults.py, issue 31).
 *
 *   faults_child LOGDIR [--epochs N] [--sleep-us N] [--wide N]
 *       Trains an MLP (Adam, N epochs (default 4) x 6 steps, 48 rows in batches of 8)
 *       with ModelSaver every 4 steps and every epoch, MaxSaver on the scalar
 *       "score" (put each epoch, rising) and the default monitors (the
 *       TensorBoard writer, stats.json, log.log); auto_resume on LOGDIR, which
 *       is kept. Prints "started" at before_train (with "resumed_from=<step>"
 *       first when it resumed), then "run=<code> global_step=<step>" and
 *       "faults=<how many calls were failed>". Exit 0 when the run returned
 *       TPT_OK, 1 with the error on stderr otherwise.
 *   faults_child check FILE...
 *       Exit 0 when every FILE is a readable checkpoint (tpt_trainer_resume);
 *       one process for all (each start loads LibTorch).
 *
 * The storage faults: this executable defines write, pwrite, pwrite64,
 * fsync, fdatasync, rename and flock (exported to the shared objects it loads, see
 * tests/meson.build, so libtptrain's calls come here); each forwards to the
 * next definition (libc's, or a sanitizer's interceptor) unless the call
 * matches the fault set in the environment:
 *   TPT_FAULT_DIR     the directory whose files fail (the log directory)
 *   TPT_FAULT_FILE    the prefix of the file names that fail ("" for all)
 *   TPT_FAULT_OP      write (write, pwrite), sync (fsync, fdatasync), rename, lock (flock),
 *                     kill: the matching write or pwrite meets SIGKILL as Linux
 *                     leaves it: what lies before the first page boundary after
 *                     its offset is written when it spans pages (the kernel
 *                     checks for a fatal signal before each page it copies;
 *                     seen on tmpfs), nothing when it lies in one page (which the
 *                     kernel writes whole or not at all); then the process dies
 *   TPT_FAULT_AT      the N-th matching call fails (1-based)
 *   TPT_FAULT_ERRNO   ENOSPC (default), EIO or ENOLCK
 *   TPT_FAULT_FULL    1: from that call on the disk is full: every matching
 *                     write that would grow its file fails (writes over a
 *                     file's existing bytes need no space, and succeed)
 * Without TPT_FAULT_AT nothing fails.
 *
 *   --wide N   each step also puts N scalars "w0".."w<N-1>": stats.json's and the
 *              event files' writes then span pages */
/* Both pwrite and pwrite64 are defined here: without this undef, meson's
 * -D_FILE_OFFSET_BITS=64 makes the headers rename pwrite to pwrite64. */
#undef _FILE_OFFSET_BITS
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "tptrain.h"

/* ---- the interposers */

typedef ssize_t (*write_fn)(int, const void *, size_t);
typedef ssize_t (*pwrite_fn)(int, const void *, size_t, off_t);
typedef int (*fsync_fn)(int);
typedef int (*rename_fn)(const char *, const char *);

static int g_ready, g_at = -1, g_errno = ENOSPC, g_full, g_seen, g_fired;
static char g_dir[PATH_MAX], g_prefix[256], g_op[16];

static void setup(void) {
  if (g_ready) return;
  g_ready = 1;
  const char *at = getenv("TPT_FAULT_AT"), *dir = getenv("TPT_FAULT_DIR"), *file = getenv("TPT_FAULT_FILE");
  const char *op = getenv("TPT_FAULT_OP"), *err = getenv("TPT_FAULT_ERRNO"), *full = getenv("TPT_FAULT_FULL");
  if (!at || !dir) return;
  if (!realpath(dir, g_dir)) snprintf(g_dir, sizeof g_dir, "%s", dir);
  snprintf(g_prefix, sizeof g_prefix, "%s", file ? file : "");
  snprintf(g_op, sizeof g_op, "%s", op ? op : "write");
  g_errno = err && !strcmp(err, "EIO") ? EIO : err && !strcmp(err, "ENOLCK") ? ENOLCK : ENOSPC;
  g_full = full && !strcmp(full, "1");
  g_at = atoi(at);
}

/* Whether `path` is a file of the faulty directory with the prefix. */
static int matches_path(const char *path) {
  size_t n = strlen(g_dir);
  if (strncmp(path, g_dir, n) != 0 || path[n] != '/') return 0;
  const char *name = path + n + 1;
  if (strchr(name, '/')) return 0;
  return strncmp(name, g_prefix, strlen(g_prefix)) == 0;
}

static int matches_fd(int fd) {
  char link[64], path[PATH_MAX];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, path, sizeof path - 1);
  if (n <= 0) return 0;
  path[n] = '\0';
  return matches_path(path);
}

/* Whether this call fails; `grows` says whether it needs new space. */
static int fail_now(const char *op, int matched, int grows) {
  setup();
  if (g_at < 0 || !matched || strcmp(op, g_op) != 0) return 0;
  ++g_seen;
  if (g_seen == g_at || (g_full && g_seen > g_at && grows)) {
    ++g_fired;
    errno = g_errno;
    return 1;
  }
  return 0;
}

static int grows_at(int fd, off_t offset, size_t count) {
  struct stat st;
  return fstat(fd, &st) != 0 || offset + (off_t)count > st.st_size;
}

/* TPT_FAULT_OP=kill: at the chosen matching call, write what the kernel would
 * have written before the signal and die. */
static void killed_now(int fd, const void *buf, size_t count, off_t offset, write_fn next_write,
                       pwrite_fn next_pwrite) {
  if (g_at < 0 || strcmp(g_op, "kill") != 0 || !matches_fd(fd) || ++g_seen != g_at) return;
  long page = sysconf(_SC_PAGESIZE);
  if (page <= 0) page = 4096;
  size_t before = (size_t)(page - offset % page);  /* the bytes before the first page boundary */
  if (count > before) {
    if (next_pwrite) next_pwrite(fd, buf, before, offset);
    else next_write(fd, buf, before);
  }
  raise(SIGKILL);
}

ssize_t write(int fd, const void *buf, size_t count) {
  static write_fn next;
  if (!next) next = (write_fn)dlsym(RTLD_NEXT, "write");
  setup();
  if (g_at >= 0 && fd > 2) killed_now(fd, buf, count, lseek(fd, 0, SEEK_CUR), next, NULL);
  if (g_at >= 0 && fd > 2 && fail_now("write", matches_fd(fd), grows_at(fd, lseek(fd, 0, SEEK_CUR), count)))
    return -1;
  return next(fd, buf, count);
}

static ssize_t pwrite_common(const char *name, int fd, const void *buf, size_t count, off_t offset) {
  pwrite_fn next = (pwrite_fn)dlsym(RTLD_NEXT, name);
  setup();
  if (g_at >= 0) killed_now(fd, buf, count, offset, NULL, next);
  if (g_at >= 0 && fail_now("write", matches_fd(fd), grows_at(fd, offset, count))) return -1;
  return next(fd, buf, count, offset);
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset) {
  return pwrite_common("pwrite", fd, buf, count, offset);
}
ssize_t pwrite64(int fd, const void *buf, size_t count, off_t offset) {
  return pwrite_common("pwrite64", fd, buf, count, offset);
}

int fsync(int fd) {
  static fsync_fn next;
  if (!next) next = (fsync_fn)dlsym(RTLD_NEXT, "fsync");
  setup();
  if (g_at >= 0 && fail_now("sync", matches_fd(fd), 0)) return -1;
  return next(fd);
}

int fdatasync(int fd) {
  static fsync_fn next;
  if (!next) next = (fsync_fn)dlsym(RTLD_NEXT, "fdatasync");
  setup();
  if (g_at >= 0 && fail_now("sync", matches_fd(fd), 0)) return -1;
  return next(fd);
}

int rename(const char *from, const char *to) {
  static rename_fn next;
  if (!next) next = (rename_fn)dlsym(RTLD_NEXT, "rename");
  setup();
  if (g_at >= 0) {
    char abs[2 * PATH_MAX + 2];
    const char *p = realpath(to, abs) ? abs : NULL;
    if (!p) {  /* the target may not exist yet: its directory does */
      char dir[PATH_MAX];
      snprintf(dir, sizeof dir, "%s", to);
      char *slash = strrchr(dir, '/');
      if (slash) {
        *slash = '\0';
        char rdir[PATH_MAX];
        if (realpath(dir, rdir)) {
          snprintf(abs, sizeof abs, "%s/%s", rdir, slash + 1);
          p = abs;
        }
      }
    }
    if (fail_now("rename", p && matches_path(p), 0)) return -1;
  }
  return next(from, to);
}

typedef int (*flock_fn)(int, int);

int flock(int fd, int operation) {
  static flock_fn next;
  if (!next) next = (flock_fn)dlsym(RTLD_NEXT, "flock");
  setup();
  if (g_at >= 0 && fail_now("lock", matches_fd(fd), 0)) return -1;
  return next(fd, operation);
}

/* ---- the training */

#define CHECK(call)                                                 \
  do {                                                              \
    tpt_status *st_ = (call);                                       \
    if (st_) {                                                      \
      fprintf(stderr, "%s: %s\n", #call, tpt_status_message(st_)); \
      exit(2);                                                      \
    }                                                               \
  } while (0)

static long sleep_us, wide;

static tpt_status *tower(tpt_tower *tw, const tpt_tensor *const *in, size_t n, void *ud) {
  (void)n, (void)ud;
  tpt_layer_options relu = TPT_LAYER_OPTIONS_INIT;
  relu.activation = TPT_ACT_RELU;
  tpt_tensor *x = NULL, *logits = NULL, *cost = NULL;
  tpt_status *st = tpt_layer_fc(&x, tw, "fc0", in[0], 16, &relu);
  if (!st) st = tpt_layer_fc(&logits, tw, "fc1", x, 4, NULL);
  if (!st) st = tpt_loss_softmax_cross_entropy(&cost, logits, in[1]);
  if (!st) st = tpt_tower_set_cost(tw, cost);
  return st;
}

static tpt_status *events(tpt_trainer *t, tpt_event ev, const tpt_record *r, void *ud) {
  (void)r, (void)ud;
  int64_t gs = 0, epoch = 0;
  tpt_status *st = tpt_trainer_global_step(&gs, t);
  if (st) return st;
  if (ev == TPT_EVENT_BEFORE_TRAIN) {
    if (gs > 0) printf("resumed_from=%lld\n", (long long)gs);
    printf("started\n");
    fflush(stdout);
  } else if (ev == TPT_EVENT_TRIGGER_STEP) {
    for (long i = 0; i < wide; ++i) {
      char name[32];
      snprintf(name, sizeof name, "w%ld", i);
      if ((st = tpt_trainer_put_scalar(t, name, 1.0 / (double)(gs + i + 3)))) return st;
    }
    if (sleep_us > 0) {
      struct timespec ts = {sleep_us / 1000000, (sleep_us % 1000000) * 1000};
      nanosleep(&ts, NULL);
    }
  } else if (ev == TPT_EVENT_TRIGGER_EPOCH) {
    if ((st = tpt_trainer_epoch_num(&epoch, t))) return st;
    return tpt_trainer_put_scalar(t, "score", (double)epoch);  /* rising: MaxSaver keeps each epoch */
  }
  return NULL;
}

static int check(int n, char **files) {
  for (int i = 0; i < n; ++i) {
    tpt_trainer *t = NULL;
    CHECK(tpt_trainer_new(&t, NULL));
    tpt_status *st = tpt_trainer_resume(t, files[i]);
    if (st) {
      fprintf(stderr, "unreadable: %s: %s\n", files[i], tpt_status_message(st));
      return 1;
    }
    tpt_trainer_free(t);
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 3 && !strcmp(argv[1], "check")) return check(argc - 2, argv + 2);
  if (argc < 2) {
    fprintf(stderr, "usage: faults_child LOGDIR [--epochs N] [--sleep-us N] [--wide N] | faults_child check FILE...\n");
    return 2;
  }
  long epochs = 4;
  for (int i = 2; i + 1 < argc; ++i) {
    if (!strcmp(argv[i], "--sleep-us")) sleep_us = atol(argv[++i]);
    else if (!strcmp(argv[i], "--epochs")) epochs = atol(argv[++i]);
    else if (!strcmp(argv[i], "--wide")) wide = atol(argv[++i]);
  }
  CHECK(tpt_manual_seed(7));
  enum { ROWS = 48, FEATURES = 8 };
  static float xs[ROWS * FEATURES];
  static int64_t ys[ROWS];
  for (int i = 0; i < ROWS; ++i) {
    for (int j = 0; j < FEATURES; ++j) xs[i * FEATURES + j] = (float)((i * 7 + j * 13) % 17) / 17.0f - 0.5f;
    ys[i] = (i * 5) % 4;
  }
  const int64_t xshape[] = {ROWS, FEATURES}, yshape[] = {ROWS};
  tpt_tensor *x = NULL, *y = NULL;
  tpt_tensor_options i64 = TPT_TENSOR_OPTIONS_INIT;
  i64.dtype = TPT_DTYPE_I64;
  CHECK(tpt_tensor_from_data(&x, xs, sizeof xs, xshape, 2, NULL));
  CHECK(tpt_tensor_from_data(&y, ys, sizeof ys, yshape, 1, &i64));
  const tpt_tensor *cols[] = {x, y};
  tpt_dataflow *rows = NULL, *batches = NULL;
  CHECK(tpt_dataflow_from_tensors(&rows, cols, 2, 1));
  CHECK(tpt_dataflow_batch(&batches, rows, 8, 1));
  CHECK(tpt_dataflow_set_seed(batches, 3));

  const int64_t in_shape[] = {-1, FEATURES}, label_shape[] = {-1};
  tpt_input_spec spec[] = {{"x", TPT_DTYPE_F32, in_shape, 2}, {"label", TPT_DTYPE_I64, label_shape, 1}};
  tpt_model *model = NULL;
  CHECK(tpt_model_new(&model, spec, 2, tower, NULL, NULL));
  tpt_optimizer *opt = NULL;
  CHECK(tpt_optimizer_new(&opt, "adam"));
  CHECK(tpt_model_set_optimizer(model, opt));
  tpt_optimizer_free(opt);

  tpt_callback *cbs[4];
  size_t n = 0;
  tpt_callback_desc d = TPT_CALLBACK_DESC_INIT;
  d.events = TPT_EVENT_BEFORE_TRAIN | TPT_EVENT_TRIGGER_STEP | TPT_EVENT_TRIGGER_EPOCH;
  d.fn = events;
  d.name = "events";
  CHECK(tpt_callback_new(&cbs[n++], &d));
  tpt_model_saver_options so = TPT_MODEL_SAVER_OPTIONS_INIT;
  so.every_k_steps = 4;
  so.max_to_keep = 2;
  so.keep_every_n_hours = 0;
  CHECK(tpt_callback_model_saver(&cbs[n++], &so));
  CHECK(tpt_callback_max_saver(&cbs[n++], "score", NULL, NULL));

  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
  o.logdir = argv[1];
  o.logdir_action = TPT_LOGDIR_KEEP;
  o.auto_resume = 1;
  o.max_epoch = epochs;
  o.console = 0;
  o.progress = TPT_PROGRESS_OFF;
  tpt_train_config c = TPT_TRAIN_CONFIG_INIT;
  c.options = &o;
  c.model = model;
  c.dataflow = batches;
  c.callbacks = cbs;
  c.n_callbacks = n;
  tpt_trainer *t = NULL;
  CHECK(tpt_trainer_from_config(&t, &c));
  tpt_status *st = tpt_trainer_run(t);
  int64_t gs = 0;
  CHECK(tpt_trainer_global_step(&gs, t));
  printf("run=%s global_step=%lld\nfaults=%d\n", st ? tpt_code_name(tpt_status_code(st)) : "TPT_OK", (long long)gs,
         g_fired);
  int rc = 0;
  if (st) {
    fprintf(stderr, "run: %s\n", tpt_status_message(st));
    tpt_status_free(st);
    rc = 1;
  }
  tpt_trainer_free(t);
  tpt_model_free(model);
  tpt_dataflow_free(rows);
  tpt_dataflow_free(batches);
  tpt_tensor_free(x);
  tpt_tensor_free(y);
  return rc;
}
