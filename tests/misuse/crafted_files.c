/* The crafted-file suite: each file of gen_crafted.py's manifest is given to
 * tpt_model_restore, or to tpt_trainer_resume and a short run, or to
 * tpt_model_from_torchscript, in a forked child under a time limit (and an
 * address-space limit without sanitizers). A file passes when it is refused
 * with the expected code and a message containing the expected fragment,
 * leaving the model's variables and its optimizer's hyper-parameters as they
 * were; or, when it is valid, when it is accepted with exactly the values it
 * holds (gen_crafted.py's W and B). No crash, no hang, no sanitizer report.
 *
 * A valid file with a read limit of 0 (tpt_set_checkpoint_read_limit) must
 * be refused the same way.
 *
 *   test_crafted_files DIR     (DIR/manifest.tsv; gen_crafted.py --run makes it)
 *
 * Output is TAP. */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tptrain.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UNDER_SANITIZER 1
#else
#define UNDER_SANITIZER 0
#endif

static const float kW[6] = {0.5f, -1.25f, 2.0f, 3.5f, -0.75f, 0.125f};
static const float kB[2] = {0.25f, -4.0f};

static int fail_at(const char *what, tpt_status *st) {
  fprintf(stderr, "%s: %s\n", what, st ? tpt_status_message(st) : "(no status)");
  tpt_status_free(st);
  return 1;
}
#define MUST(call, what)                    \
  do {                                      \
    tpt_status *st_ = (call);               \
    if (st_) return fail_at((what), st_);   \
  } while (0)

static tpt_status *fc_cost(tpt_tower *tw, const tpt_tensor *const *in, size_t n, void *ud) {
  (void)n, (void)ud;
  tpt_tensor *y = NULL, *sq = NULL, *mean = NULL;
  tpt_status *st = tpt_layer_fc(&y, tw, "fc", in[0], 2, NULL);
  if (!st) st = tpt_op_mul(&sq, y, y);
  if (!st) {
    tpt_arg a[1] = {{0}};
    a[0].kind = TPT_ARG_TENSOR;
    a[0].tensor = sq;
    size_t n_out = 0;
    st = tpt_op_call(&mean, 1, &n_out, "aten::mean", NULL, a, 1);
  }
  if (!st) st = tpt_tower_set_cost(tw, mean);
  return st;
}

/* A callback with a state (a tensor of any dtype and shape), keyed "state". */
static tpt_status *cb_fn(tpt_trainer *t, tpt_event e, const tpt_record *r, void *ud) {
  (void)t, (void)e, (void)r, (void)ud;
  return NULL;
}
static tpt_status *cb_save(tpt_tensor **out, void *ud) {
  (void)ud;
  const int64_t shape[] = {1};
  float v = 1;
  return tpt_tensor_from_data(out, &v, sizeof v, shape, 1, NULL);
}
static tpt_status *cb_restore(const tpt_tensor *state, void *ud) {
  (void)state, (void)ud;
  return NULL;
}

/* The model's variables, and the optimizer's learning rate and beta1. */
typedef struct snapshot {
  float w[6], b[2];
  double lr, beta1;
} snapshot;

static int take(snapshot *s, tpt_model *m, tpt_optimizer *opt) {
  tpt_tensor *w = NULL, *b = NULL;
  MUST(tpt_model_variable(&w, m, "fc/W"), "fc/W");
  MUST(tpt_model_variable(&b, m, "fc/b"), "fc/b");
  MUST(tpt_tensor_copy_to(s->w, sizeof s->w, w), "copy fc/W");
  MUST(tpt_tensor_copy_to(s->b, sizeof s->b, b), "copy fc/b");
  tpt_tensor_free(w);
  tpt_tensor_free(b);
  MUST(tpt_optimizer_get(&s->lr, opt, "learning_rate"), "learning_rate");
  MUST(tpt_optimizer_get(&s->beta1, opt, "beta1"), "beta1");
  return 0;
}

static int run_case(const char *dir, const char *file, const char *mode, const char *expect, const char *code,
                    const char *fragment) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  const int64_t shape[] = {-1, 3};
  tpt_input_spec spec[] = {{"x", TPT_DTYPE_F32, shape, 2}};
  tpt_status *st = NULL;
  if (strcmp(mode, "torchscript") == 0) {
    tpt_model *ts = NULL;
    st = tpt_model_from_torchscript(&ts, path, spec, 1);
    tpt_model_free(ts);
  } else {
    tpt_model *m = NULL;
    tpt_optimizer *opt = NULL;
    MUST(tpt_model_new(&m, spec, 1, fc_cost, NULL, NULL), "model");
    MUST(tpt_optimizer_new(&opt, "adam"), "optimizer");
    MUST(tpt_model_set_optimizer(m, opt), "set optimizer");
    MUST(tpt_model_build(m), "build");
    snapshot before, after;
    if (take(&before, m, opt)) return 1;
    if (strcmp(mode, "restore") == 0) {
      st = tpt_model_restore(NULL, m, path, NULL);
    } else if (strcmp(mode, "read-limit") == 0) {
      /* no room beyond the file's own size: a valid file needs more (the
       * reader's tables); the limit is process-wide, this child's only */
      tpt_status *big = tpt_set_checkpoint_read_limit(UINT64_MAX);
      if (!big || tpt_status_code(big) != TPT_ERR_INVALID_ARGUMENT) {
        fprintf(stderr, "%s: a read limit of 2^64 - 1 was taken\n", file);
        return 1;
      }
      tpt_status_free(big);
      MUST(tpt_set_checkpoint_read_limit(0), "read limit 0");
      st = tpt_model_restore(NULL, m, path, NULL);
    } else {
      tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
      o.max_epoch = 3;
      o.steps_per_epoch = 2;
      o.console = 0;
      o.progress = TPT_PROGRESS_OFF;
      o.default_callbacks = 0;
      o.default_monitors = 0;
      tpt_trainer *t = NULL;
      MUST(tpt_trainer_new(&t, &o), "trainer");
      tpt_callback_desc d = TPT_CALLBACK_DESC_INIT;
      d.name = "state";
      d.fn = cb_fn;
      d.save = cb_save;
      d.restore = cb_restore;
      tpt_callback *cb = NULL;
      MUST(tpt_callback_new(&cb, &d), "callback");
      MUST(tpt_trainer_add_callback(t, cb), "add callback");
      tpt_input *in = NULL;
      MUST(tpt_input_dummy(&in, 2), "input");
      MUST(tpt_trainer_set_model(t, m, in), "set model");
      st = tpt_trainer_resume(t, path);
      if (!st) st = tpt_trainer_run(t);
      tpt_trainer_free(t);
    }
    if (take(&after, m, opt)) return 1;
    if (strcmp(expect, "ok") == 0 && strcmp(mode, "restore") == 0 && !st) {
      if (memcmp(after.w, kW, sizeof kW) != 0 || memcmp(after.b, kB, sizeof kB) != 0) {
        fprintf(stderr, "%s: restored, but not to the file's values (W[0] %g, b[0] %g)\n", file, after.w[0], after.b[0]);
        return 1;
      }
    }
    if (st && memcmp(&before, &after, sizeof before) != 0) {
      fprintf(stderr, "%s: refused (%s), but the model or its optimizer changed\n", file, tpt_status_message(st));
      return 1;
    }
    tpt_optimizer_free(opt);
    tpt_model_free(m);
  }
  if (strcmp(expect, "ok") == 0) {
    if (st) return fail_at(file, st);
    return 0;
  }
  if (!st) {
    fprintf(stderr, "%s: accepted; expected %s (\"%s\")\n", file, code, fragment);
    return 1;
  }
  int ok = strcmp(tpt_code_name(tpt_status_code(st)), code) == 0 && strstr(tpt_status_message(st), fragment) != NULL &&
           strstr(tpt_status_message(st), "INTERNAL ASSERT") == NULL;
  if (!ok) fprintf(stderr, "%s: expected %s (\"%s\"), got %s: %s\n", file, code, fragment,
                   tpt_code_name(tpt_status_code(st)), tpt_status_message(st));
  else if (getenv("TPT_CRAFTED_VERBOSE")) fprintf(stderr, "%s: %s\n", file, tpt_status_message(st));
  tpt_status_free(st);
  return ok ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DIR (with DIR/manifest.tsv)\n", argv[0]);
    return 2;
  }
  char manifest[4096];
  snprintf(manifest, sizeof manifest, "%s/manifest.tsv", argv[1]);
  FILE *f = fopen(manifest, "r");
  if (!f) {
    perror(manifest);
    return 2;
  }
  char line[8192];
  int n = 0, failed = 0;
  char *lines[1024];
  while (n < 1024 && fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = '\0';
    if (line[0]) lines[n++] = strdup(line);
  }
  fclose(f);
  printf("1..%d\n", n);
  fflush(stdout);
  for (int i = 0; i < n; ++i) {
    char *fields[5] = {0};
    char *p = lines[i];
    for (int k = 0; k < 5; ++k) {
      fields[k] = p ? p : (char *)"";
      char *tab = p ? strchr(p, '\t') : NULL;
      if (tab) *tab = '\0';
      p = tab ? tab + 1 : NULL;
    }
    pid_t pid = fork();
    if (pid == 0) {
      alarm(120);
      if (!UNDER_SANITIZER) {
        struct rlimit as = {(rlim_t)8 << 30, (rlim_t)8 << 30};  /* 8 GiB of address space */
        setrlimit(RLIMIT_AS, &as);
      }
      /* exit, not _exit: under ASan the leak check runs on every case, refusals included */
      exit(run_case(argv[1], fields[0], fields[1], fields[2], fields[3], fields[4]));
    }
    int status = 0;
    waitpid(pid, &status, 0);
    int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok) ++failed;
    printf("%s %d - %s (%s, %s)", ok ? "ok" : "not ok", i + 1, fields[0], fields[1], fields[2]);
    if (WIFSIGNALED(status)) printf(" # killed by signal %d", WTERMSIG(status));
    printf("\n");
    fflush(stdout);
    free(lines[i]);
  }
  printf("# %d of %d crafted files as expected\n", n - failed, n);
  return failed ? 1 : 0;
}
