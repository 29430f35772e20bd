/* The parity MLP's tower function (tests/c/parity_mlp.c, dist_mlp.c):
 * cost = mse(linear(relu(linear(x, fc1/W, fc1/b)), fc2/W, fc2/b), y), with x
 * [B, D], y [B, 1] and H hidden units, and the prediction as an output. */
#ifndef TPT_TESTS_PARITY_MLP_TOWER_H
#define TPT_TESTS_PARITY_MLP_TOWER_H

#include "parity_common.h"

static int64_t N, D, H;

/* The training calls whose cost is multiplied by 1e36 (their scaled
 * gradients overflow): TPT_PARITY_OVERFLOW="0,5,6" (read at the first call). */
static int parity_overflows(long call) {
  static long steps[64];
  static int n = -1;
  if (n < 0) {
    n = 0;
    const char *e = getenv("TPT_PARITY_OVERFLOW");
    while (e && *e && n < 64) {
      char *end = NULL;
      steps[n++] = strtol(e, &end, 10);
      e = *end == ',' ? end + 1 : end;
      if (end == e && *e) break;
    }
  }
  for (int i = 0; i < n; ++i)
    if (steps[i] == call) return 1;
  return 0;
}
static long parity_training_calls;

/* cost = mse(linear(relu(linear(x, w1, b1)), w2, b2), y) */
static tpt_status *parity_mlp_tower(tpt_tower *tw, const tpt_tensor *const *in, size_t n_in, void *ud) {
  (void)n_in;
  (void)ud;
  tpt_tensor *w1 = NULL, *b1 = NULL, *w2 = NULL, *b2 = NULL, *h = NULL, *a = NULL, *p = NULL, *cost = NULL;
  const int64_t sw1[] = {H, D}, sb1[] = {H}, sw2[] = {1, H}, sb2[] = {1};
  tpt_status *st = NULL;
  if ((st = tpt_tower_variable(&w1, tw, "fc1/W", sw1, 2, NULL))) goto done;
  if ((st = tpt_tower_variable(&b1, tw, "fc1/b", sb1, 1, NULL))) goto done;
  if ((st = tpt_tower_variable(&w2, tw, "fc2/W", sw2, 2, NULL))) goto done;
  if ((st = tpt_tower_variable(&b2, tw, "fc2/b", sb2, 1, NULL))) goto done;
  {
    tpt_arg l1[] = {parity_arg(in[0]), parity_arg(w1), parity_arg(b1)};
    if ((st = parity_op1(&h, "aten::linear", l1, 3))) goto done;
    tpt_arg r[] = {parity_arg(h)};
    if ((st = parity_op1(&a, "aten::relu", r, 1))) goto done;
    tpt_arg l2[] = {parity_arg(a), parity_arg(w2), parity_arg(b2)};
    if ((st = parity_op1(&p, "aten::linear", l2, 3))) goto done;
    tpt_arg m[] = {parity_arg(p), parity_arg(in[1])};
    if ((st = parity_op1(&cost, "aten::mse_loss", m, 2))) goto done;
    int32_t building = 0;
    if ((st = tpt_tower_is_building(&building, tw))) goto done;
    if (!building && parity_overflows(parity_training_calls++)) {
      tpt_tensor *big = NULL;
      if ((st = tpt_op_mul_scalar(&big, cost, 1e36))) goto done;
      tpt_tensor_free(cost);
      cost = big;
    }
    if ((st = tpt_tower_set_cost(tw, cost))) goto done;
    st = tpt_tower_set_output(tw, "prediction", p);
  }
done:
  tpt_tensor_free(w1);
  tpt_tensor_free(b1);
  tpt_tensor_free(w2);
  tpt_tensor_free(b2);
  tpt_tensor_free(h);
  tpt_tensor_free(a);
  tpt_tensor_free(p);
  tpt_tensor_free(cost);
  return st;
}

#endif
