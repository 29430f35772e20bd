/* test_data_speed: tensorpack's TestDataSpeed as a tool. Builds the
 * Fashion-MNIST input pipeline (decode, normalize to [-1, 1], optionally
 * random crop with padding and flip, batch) and iterates it, printing
 * datapoints per second with a progress bar (on a terminal) or a final line.
 *
 *   test_data_speed [--dir DIR] [--split train|test] [--batch N] [--threads N]
 *                   [--augment] [--prefetch CAPACITY] [--count N] [--warmup N]
 *
 * --count is the number of datapoints of the pipeline (batches when --batch
 * is not 0) to time after --warmup untimed ones. The last line is
 *   test_data_speed: N datapoints (M images) in S s: R datapoints/s, I images/s */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tptrain_util.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void usage(void) {
  fprintf(stderr,
          "usage: test_data_speed [--dir DIR] [--split train|test] [--batch N] [--threads N]\n"
          "                       [--augment] [--prefetch CAPACITY] [--count N] [--warmup N]\n");
  exit(2);
}

/* Draws the bar: [#####.....] 120/500 2345.6 it/s */
static void bar(int64_t done, int64_t total, double rate) {
  const int width = 30;
  int fill = total > 0 ? (int)(width * done / total) : 0;
  char b[64];
  for (int i = 0; i < width; ++i) b[i] = i < fill ? '#' : '.';
  b[width] = '\0';
  fprintf(stderr, "\r[%s] %lld/%lld %.1f it/s", b, (long long)done, (long long)total, rate);
  fflush(stderr);
}

int main(int argc, char **argv) {
  const char *dir = "/usr/share/datasets/fashion-mnist", *split = "train";
  int64_t batch = 128, count = 200, warmup = 10, prefetch = 0;
  int threads = 0, augment = 0;
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--augment")) { augment = 1; continue; }
    if (!v) usage();
    if (!strcmp(a, "--dir")) dir = v;
    else if (!strcmp(a, "--split")) split = v;
    else if (!strcmp(a, "--batch")) batch = atoll(v);
    else if (!strcmp(a, "--threads")) threads = atoi(v);
    else if (!strcmp(a, "--prefetch")) prefetch = atoll(v);
    else if (!strcmp(a, "--count")) count = atoll(v);
    else if (!strcmp(a, "--warmup")) warmup = atoll(v);
    else usage();
    ++i;
  }
  if (count < 1 || warmup < 0 || batch < 0 || threads < 0 || prefetch < 0) usage();

  tpt_dataflow *df = NULL, *next = NULL;
  TPT_CHECK_OR_DIE(tpt_dataflow_mnist(&df, dir, split, 1));
  const double mean = 0.5, std = 0.5;
  tpt_augmentor augs[3] = {TPT_AUGMENTOR_INIT, TPT_AUGMENTOR_INIT, TPT_AUGMENTOR_INIT};
  augs[0].kind = TPT_AUGMENT_NORMALIZE;
  augs[0].mean = &mean, augs[0].std = &std, augs[0].n_channels = 1;
  augs[1].kind = TPT_AUGMENT_RANDOM_CROP;
  augs[1].height = augs[1].width = 28, augs[1].padding = 2;
  augs[2].kind = TPT_AUGMENT_FLIP; /* probability 0.5 */
  TPT_CHECK_OR_DIE(tpt_dataflow_augment(&next, df, 0, augs, augment ? 3 : 1, threads));
  tpt_dataflow_free(df);
  df = next;
  if (batch > 0) {
    TPT_CHECK_OR_DIE(tpt_dataflow_batch(&next, df, batch, 0));
    tpt_dataflow_free(df);
    df = next;
  }
  if (prefetch > 0) {
    TPT_CHECK_OR_DIE(tpt_dataflow_prefetch(&next, df, prefetch));
    tpt_dataflow_free(df);
    df = next;
  }
  /* Passes follow each other: the count may span several. */
  TPT_CHECK_OR_DIE(tpt_dataflow_repeat(&next, df, -1));
  tpt_dataflow_free(df);
  df = next;

  tpt_datapoint *dp = NULL;
  TPT_CHECK_OR_DIE(tpt_datapoint_new(&dp));
  TPT_CHECK_OR_DIE(tpt_dataflow_reset_state(df));
  for (int64_t i = 0; i < warmup; ++i) TPT_CHECK_OR_DIE(tpt_dataflow_next(df, dp));
  const int tty = isatty(2);
  const double start = now();
  double last = start;
  int64_t images = 0;
  for (int64_t i = 0; i < count; ++i) {
    TPT_CHECK_OR_DIE(tpt_dataflow_next(df, dp));
    tpt_tensor *img = NULL;
    int64_t dims[8] = {1};
    TPT_CHECK_OR_DIE(tpt_datapoint_get(&img, dp, 0));
    if (batch > 0) TPT_CHECK_OR_DIE(tpt_tensor_shape(dims, 8, img));
    const int64_t rows = batch > 0 ? dims[0] : 1;
    tpt_tensor_free(img);
    images += rows;
    const double t = now();
    if (tty && (t - last > 0.1 || i + 1 == count)) {
      bar(i + 1, count, (double)(i + 1) / (t - start));
      last = t;
    }
  }
  const double secs = now() - start;
  if (tty) fputc('\n', stderr);
  printf("test_data_speed: %lld datapoints (%lld images) in %.2f s: %.1f datapoints/s, %.0f images/s\n",
         (long long)count, (long long)images, secs, (double)count / secs, (double)images / secs);
  tpt_datapoint_free(dp);
  tpt_dataflow_free(df);
  return 0;
}
