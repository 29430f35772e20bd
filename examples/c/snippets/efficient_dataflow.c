/* docs/dataflow.md, "Efficient dataflows": a cheap source, the expensive
 * work in a parallel map on worker threads, batches, a prefetch thread, and
 * the speed of one pass measured (tensorpack's "Efficient DataFlow"). The
 * part between the [doc] markers is shown in the page (checked by the
 * doc-snippets test); the whole program is built and run by the examples
 * test. */
#include <stdio.h>
#include <time.h>

#include "tptrain_util.h"

enum { RECORDS = 1024 };

// [doc]
/* The expensive part ("decoding"), on the map's worker threads, several at
 * once: appends x * x to the record x. */
static tpt_status *decode(tpt_datapoint *dp, void *user_data) {
  (void)user_data;
  tpt_tensor *x = NULL, *xx = NULL;
  TPT_RETURN_IF_ERROR(tpt_datapoint_get(&x, dp, 0));
  tpt_status *st = tpt_op_mul(&xx, x, x);
  if (!st) st = tpt_datapoint_set(dp, 1, xx);
  tpt_tensor_free(x);
  tpt_tensor_free(xx);
  return st;
}

static double now(void) {
  struct timespec ts;
  timespec_get(&ts, TIME_UTC);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void pipeline(const tpt_tensor *records) {
  tpt_parallel_map_options o = TPT_PARALLEL_MAP_OPTIONS_INIT;
  o.n_threads = 2;
  o.ordered = 1; /* in the source's order (else as the threads finish) */
  o.strict = 1;  /* each pass maps exactly one pass of the source */
  tpt_dataflow *source, *decoded, *batched, *prefetched;
  TPT_CHECK_OR_DIE(tpt_dataflow_from_tensors(&source, &records, 1, /*shuffle=*/0));
  TPT_CHECK_OR_DIE(tpt_dataflow_parallel_map(&decoded, source, decode, NULL, NULL, &o));
  TPT_CHECK_OR_DIE(tpt_dataflow_batch(&batched, decoded, 64, /*remainder=*/0));
  TPT_CHECK_OR_DIE(tpt_dataflow_prefetch(&prefetched, batched, 4)); /* batches while the model trains */

  /* tensorpack's TestDataSpeed: one pass, timed. */
  tpt_datapoint *dp = NULL;
  TPT_CHECK_OR_DIE(tpt_datapoint_new(&dp));
  TPT_CHECK_OR_DIE(tpt_dataflow_reset_state(prefetched)); /* starts the threads */
  int64_t batches = 0;
  double sum = 0, last = 0, start = now();
  tpt_status *st;
  while (!(st = tpt_dataflow_next(prefetched, dp))) {
    tpt_tensor *squares = NULL;
    float v[64];
    TPT_CHECK_OR_DIE(tpt_datapoint_get(&squares, dp, 1));
    TPT_CHECK_OR_DIE(tpt_tensor_copy_to(v, sizeof v, squares));
    tpt_tensor_free(squares);
    for (int i = 0; i < 64; ++i) sum += v[i];
    last = v[63];
    ++batches;
  }
  if (tpt_status_code(st) != TPT_STOP) TPT_CHECK_OR_DIE(st);
  tpt_status_free(st);
  double seconds = now() - start;
  printf("%lld batches of 64, sum of squares %.0f, last %.0f\n", (long long)batches, sum, last);
  printf("%.0f datapoints/s\n", (double)(batches * 64) / seconds);
  tpt_datapoint_free(dp);
  tpt_dataflow_free(source);
  tpt_dataflow_free(decoded);
  tpt_dataflow_free(batched);
  tpt_dataflow_free(prefetched);
}
// [/doc]

/* The records: the numbers 0 .. 1023, one per datapoint. */
int main(void) {
  float v[RECORDS];
  for (int i = 0; i < RECORDS; ++i) v[i] = (float)i;
  const int64_t shape[] = {RECORDS};
  tpt_tensor *records = NULL;
  TPT_CHECK_OR_DIE(tptu_tensor_f32(&records, v, shape, 1));
  pipeline(records);
  tpt_tensor_free(records);
  return 0;
}
