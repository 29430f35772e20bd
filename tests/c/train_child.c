/* A small training driven by command-line flags, for tests that look at what
 * a run leaves on disk and on the terminal (tests/py/test_trainer_files.py).
 *
 *   train_child LOGDIR START MAX STEPS ACTION [flags]
 *   ACTION: refuse keep delete backup new ask
 *   flags: --sleep-us N   sleep per step      --slow-trigger  a callback that
 *          --nan          put NaN/Inf too                     sleeps 2.1 s per epoch
 *          --progress auto|bar|lines|off      --quiet          console off
 *          --peek N       at global step N, print "peek_entries=K": the entries
 *                         stats.json has then (how often it is rewritten)
 *          --before-train put "init" = 0.25 in before_train (global_step set to 7
 *                         there first)
 * Each step puts "loss"; after each epoch a callback puts "acc". Prints the
 * log directory in use as its last line "logdir=...". */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tptrain.h"

static long sleep_us;
static int put_nan;
static long long peek_at = -1;

/* The entries in the log directory's stats.json: one "global_step" key each. */
static long count_entries(tpt_trainer *t) {
  const char *dir = NULL;
  tpt_status *st = tpt_trainer_logdir(&dir, t);
  if (st || !dir) {
    tpt_status_free(st);
    return -1;
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/stats.json", dir);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  long n = 0;
  char line[4096];
  while (fgets(line, sizeof line, f))
    if (strstr(line, "\"global_step\"")) ++n;
  fclose(f);
  return n;
}

static void die(tpt_status *st) {
  if (!st) return;
  fprintf(stderr, "error: %s (%s)\n", tpt_status_message(st), tpt_code_name(tpt_status_code(st)));
  tpt_status_free(st);
  exit(3);
}

static tpt_status *run_step(tpt_trainer *t, void *ud) {
  (void)ud;
  tpt_status *st = tpt_trainer_hooked_step(t, NULL, NULL);
  if (st) return st;
  int64_t g;
  die(tpt_trainer_global_step(&g, t));
  if (sleep_us > 0) {
    struct timespec ts = {sleep_us / 1000000, (sleep_us % 1000000) * 1000};
    nanosleep(&ts, NULL);
  }
  if (g == peek_at) printf("peek_entries=%ld\n", count_entries(t));
  st = tpt_trainer_put_scalar(t, "loss", 1.0 / (double)g);
  if (!st && put_nan) st = tpt_trainer_put_scalar(t, "weird", (g % 2) ? NAN : INFINITY);
  return st;
}

static tpt_status *epoch_cb(tpt_trainer *t, tpt_event e, const tpt_record *r, void *ud) {
  (void)e;
  (void)r;
  (void)ud;
  int64_t epoch;
  die(tpt_trainer_epoch_num(&epoch, t));
  return tpt_trainer_put_scalar(t, "acc", 0.5 + 0.01 * (double)epoch);
}

static tpt_status *slow_cb(tpt_trainer *t, tpt_event e, const tpt_record *r, void *ud) {
  (void)t;
  (void)e;
  (void)r;
  (void)ud;
  struct timespec ts = {2, 100000000};
  nanosleep(&ts, NULL);
  return NULL;
}

static tpt_status *before_train_cb(tpt_trainer *t, tpt_event e, const tpt_record *r, void *ud) {
  (void)e;
  (void)r;
  (void)ud;
  die(tpt_trainer_set_global_step(t, 7));
  return tpt_trainer_put_scalar(t, "init", 0.25);
}

static void add(tpt_trainer *t, const char *name, uint32_t events, tpt_callback_fn fn) {
  tpt_callback_desc d = TPT_CALLBACK_DESC_INIT;
  d.name = name;
  d.events = events;
  d.fn = fn;
  tpt_callback *cb = NULL;
  die(tpt_callback_new(&cb, &d));
  die(tpt_trainer_add_callback(t, cb));
}

int main(int argc, char **argv) {
  if (argc < 6) {
    fprintf(stderr, "usage: train_child LOGDIR START MAX STEPS ACTION [flags]\n");
    return 2;
  }
  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
  o.logdir = argv[1];
  o.starting_epoch = atoll(argv[2]);
  o.max_epoch = atoll(argv[3]);
  o.steps_per_epoch = atoll(argv[4]);
  const char *actions[] = {"refuse", "keep", "delete", "backup", "new", "ask"};
  o.logdir_action = (tpt_logdir_action)-1;
  for (int i = 0; i < 6; ++i)
    if (strcmp(argv[5], actions[i]) == 0) o.logdir_action = (tpt_logdir_action)i;
  int slow = 0, before_train = 0;
  for (int i = 6; i < argc; ++i) {
    if (strcmp(argv[i], "--sleep-us") == 0 && i + 1 < argc) sleep_us = atol(argv[++i]);
    else if (strcmp(argv[i], "--slow-trigger") == 0) slow = 1;
    else if (strcmp(argv[i], "--nan") == 0) put_nan = 1;
    else if (strcmp(argv[i], "--before-train") == 0) before_train = 1;
    else if (strcmp(argv[i], "--quiet") == 0) o.console = 0;
    else if (strcmp(argv[i], "--peek") == 0 && i + 1 < argc) peek_at = atoll(argv[++i]);
    else if (strcmp(argv[i], "--progress") == 0 && i + 1 < argc) {
      const char *p = argv[++i];
      o.progress = strcmp(p, "bar") == 0 ? TPT_PROGRESS_BAR
                   : strcmp(p, "lines") == 0 ? TPT_PROGRESS_LINES
                   : strcmp(p, "off") == 0 ? TPT_PROGRESS_OFF : TPT_PROGRESS_AUTO;
    }
  }
  tpt_trainer *t = NULL;
  die(tpt_trainer_new(&t, &o));
  die(tpt_trainer_set_run_step(t, run_step, NULL, NULL));
  add(t, "epoch_scalars", TPT_EVENT_TRIGGER_EPOCH, epoch_cb);
  if (slow) add(t, "slow", TPT_EVENT_TRIGGER, slow_cb);
  if (before_train) add(t, "before_train", TPT_EVENT_BEFORE_TRAIN, before_train_cb);
  die(tpt_trainer_run(t));
  const char *dir = NULL;
  die(tpt_trainer_logdir(&dir, t));
  printf("logdir=%s\n", dir ? dir : "");
  tpt_trainer_free(t);
  return 0;
}
