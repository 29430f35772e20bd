/* docs/dataflow.md, "Dataflows": a source from a function, a map, a batch, a
 * prefetch thread, one pass iterated by hand. The part between the [doc]
 * markers is shown in the page (checked by the doc-snippets test); the whole
 * program is built and run by the examples test. */
#include <stdio.h>

#include "tptrain_util.h"

// [doc]
/* A source: the numbers 0..9, one per datapoint; TPT_STOP ends a pass. */
static tpt_status *numbers(tpt_datapoint *dp, void *user_data) {
  int64_t *i = user_data;
  if (*i == 10) {
    *i = 0; /* the next call starts the next pass */
    return tpt_status_new(TPT_STOP, "end of pass");
  }
  float v = (float)(*i)++;
  tpt_tensor *x = NULL;
  TPT_RETURN_IF_ERROR(tpt_tensor_from_data(&x, &v, sizeof v, NULL, 0, NULL));
  tpt_status *st = tpt_datapoint_set(dp, 0, x); /* the datapoint shares x */
  tpt_tensor_free(x); /* dataflow functions free what they make (no tensor scope) */
  return st;
}

static int64_t ten(void *user_data) {
  (void)user_data;
  return 10; /* datapoints per pass: a trainer's default steps_per_epoch */
}

/* A map: appends x * x as a second component. */
static tpt_status *square(tpt_datapoint *dp, void *user_data) {
  (void)user_data;
  tpt_tensor *x = NULL, *xx = NULL;
  TPT_RETURN_IF_ERROR(tpt_datapoint_get(&x, dp, 0));
  tpt_status *st = tpt_op_mul(&xx, x, x);
  if (!st) st = tpt_datapoint_set(dp, 1, xx);
  tpt_tensor_free(x);
  tpt_tensor_free(xx);
  return st;
}

int main(void) {
  int64_t position = 0;
  tpt_dataflow_callbacks src = TPT_DATAFLOW_CALLBACKS_INIT;
  src.next = numbers;
  src.size = ten;
  tpt_dataflow *raw, *mapped, *batched, *prefetched;
  TPT_CHECK_OR_DIE(tpt_dataflow_from_callbacks(&raw, &src, &position, NULL));
  TPT_CHECK_OR_DIE(tpt_dataflow_map(&mapped, raw, square, NULL, NULL));
  TPT_CHECK_OR_DIE(tpt_dataflow_batch(&batched, mapped, 4, /*remainder=*/1)); /* 4, 4, 2 */
  TPT_CHECK_OR_DIE(tpt_dataflow_prefetch(&prefetched, batched, 3));          /* a thread reads ahead */
  tpt_datapoint *dp = NULL;
  TPT_CHECK_OR_DIE(tpt_datapoint_new(&dp));
  tpt_status *st;
  while (!(st = tpt_dataflow_next(prefetched, dp))) {
    tpt_tensor *squares = NULL;
    TPT_CHECK_OR_DIE(tpt_datapoint_get(&squares, dp, 1));
    int64_t n = 0;
    TPT_CHECK_OR_DIE(tpt_tensor_numel(&n, squares));
    float v[4] = {0};
    TPT_CHECK_OR_DIE(tpt_tensor_copy_to(v, (size_t)n * sizeof(float), squares));
    printf("a batch of %lld, last square %.0f\n", (long long)n, v[n - 1]);
    tpt_tensor_free(squares); /* outside a callback: ours to free */
  }
  if (tpt_status_code(st) != TPT_STOP) TPT_CHECK_OR_DIE(st); /* an error, or the end of the pass */
  tpt_status_free(st);
  tpt_datapoint_free(dp);
  tpt_dataflow_free(raw); /* each combinator keeps its own reference */
  tpt_dataflow_free(mapped);
  tpt_dataflow_free(batched);
  tpt_dataflow_free(prefetched);
  return 0;
}
// [/doc]
