/* docs/custom_trainers.md, "Train ops": a model of two parts, a train op for
 * each (its own cost, variables and optimizer), and a run_step of our own
 * that runs them. The part between the [doc] markers is shown in the page
 * (checked by the doc-snippets test); the whole program is built and run by
 * the examples test. */
#include <stdio.h>

#include "tptrain_util.h"

enum { ROWS = 256 };

// [doc]
/* Two parts on one input: "a" fits the target ya, "b" the target yb. Each
 * publishes its own cost; the tower's cost is their sum. */
static tpt_status *tower(tpt_tower *tw, const tpt_tensor *const *in, size_t n, void *user_data) {
  (void)n, (void)user_data;
  tpt_tensor *pa, *pb, *loss_a, *loss_b, *cost;
  TPT_RETURN_IF_ERROR(tpt_layer_fc(&pa, tw, "a", in[0], 1, NULL)); /* a/W, a/b */
  TPT_RETURN_IF_ERROR(tpt_layer_fc(&pb, tw, "b", in[0], 1, NULL)); /* b/W, b/b */
  TPT_RETURN_IF_ERROR(tpt_loss_mse(&loss_a, pa, in[1]));
  TPT_RETURN_IF_ERROR(tpt_loss_mse(&loss_b, pb, in[2]));
  TPT_RETURN_IF_ERROR(tpt_tower_set_output(tw, "loss_a", loss_a));
  TPT_RETURN_IF_ERROR(tpt_tower_set_output(tw, "loss_b", loss_b));
  TPT_RETURN_IF_ERROR(tpt_op_add(&cost, loss_a, loss_b));
  return tpt_tower_set_cost(tw, cost);
}

/* Each step: b's update without hooks (no callbacks, global_step stays),
 * then a's as the hooked step; each takes a batch of its own. */
static tpt_status *run_step(tpt_trainer *t, void *user_data) {
  (void)user_data;
  const char *b_op[] = {"b_op"}, *a_op[] = {"a_op"};
  TPT_RETURN_IF_ERROR(tpt_trainer_run_train_ops(t, b_op, 1, /*hooked=*/0));
  return tpt_trainer_run_train_ops(t, a_op, 1, /*hooked=*/1);
}

static double variable(tpt_model *model, const char *name) {
  tpt_tensor *v = NULL;
  double value = 0;
  TPT_CHECK_OR_DIE(tpt_model_variable(&v, model, name));
  TPT_CHECK_OR_DIE(tpt_tensor_item(&value, v));
  tpt_tensor_free(v);
  return value;
}

static void train(tpt_dataflow *batches) {
  const int64_t shape[] = {-1, 1};
  tpt_input_spec spec[] = {{"x", TPT_DTYPE_F32, shape, 2}, {"ya", TPT_DTYPE_F32, shape, 2},
                           {"yb", TPT_DTYPE_F32, shape, 2}};
  tpt_model *model = NULL;
  tpt_optimizer *sgd = NULL, *b_sgd = NULL;
  TPT_CHECK_OR_DIE(tpt_model_new(&model, spec, 3, tower, NULL, NULL));
  TPT_CHECK_OR_DIE(tpt_optimizer_new(&sgd, "sgd"));
  TPT_CHECK_OR_DIE(tpt_optimizer_set(sgd, "learning_rate", 0.3));
  TPT_CHECK_OR_DIE(tpt_model_set_optimizer(model, sgd));
  TPT_CHECK_OR_DIE(tpt_optimizer_new(&b_sgd, "sgd"));
  TPT_CHECK_OR_DIE(tpt_optimizer_set(b_sgd, "learning_rate", 0.2));

  tpt_train_op a = TPT_TRAIN_OP_INIT, b = TPT_TRAIN_OP_INIT;
  a.name = "a_op";
  a.cost = "loss_a";
  a.scope = "a/"; /* a copy of the model's optimizer */
  b.name = "b_op";
  b.cost = "loss_b";
  b.scope = "b/";
  b.optimizer = b_sgd; /* an optimizer of its own */
  TPT_CHECK_OR_DIE(tpt_model_add_train_op(model, &a));
  TPT_CHECK_OR_DIE(tpt_model_add_train_op(model, &b));

  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
  o.max_epoch = 5;
  o.progress = TPT_PROGRESS_OFF;
  tpt_trainer *t = NULL;
  tpt_input *input = NULL;
  TPT_CHECK_OR_DIE(tpt_trainer_new(&t, &o));
  TPT_CHECK_OR_DIE(tpt_input_from_dataflow(&input, batches, NULL));
  TPT_CHECK_OR_DIE(tpt_trainer_set_model(t, model, input)); /* takes the input */
  TPT_CHECK_OR_DIE(tpt_trainer_set_run_step(t, run_step, NULL, NULL));
  TPT_CHECK_OR_DIE(tpt_trainer_run(t));
  int64_t steps = 0;
  TPT_CHECK_OR_DIE(tpt_trainer_global_step(&steps, t));
  printf("global_step %lld: a fits %.2f x + %.2f, b fits %.2f x + %.2f\n", (long long)steps,
         variable(model, "a/W"), variable(model, "a/b"), variable(model, "b/W"), variable(model, "b/b"));
  tpt_trainer_free(t);
  tpt_optimizer_free(sgd);
  tpt_optimizer_free(b_sgd);
  tpt_model_free(model);
}
// [/doc]

/* Rows of x spread evenly over [-1, 1), ya = 3 x + 2 and yb = 0.5 - x, in
 * batches of 32. */
int main(void) {
  float xv[ROWS], ya[ROWS], yb[ROWS];
  for (int i = 0; i < ROWS; ++i) {
    xv[i] = (float)(2 * i - ROWS) / ROWS;
    ya[i] = 3 * xv[i] + 2;
    yb[i] = 0.5f - xv[i];
  }
  TPT_CHECK_OR_DIE(tpt_manual_seed(0));
  const int64_t shape[] = {ROWS, 1};
  tpt_tensor *x, *a, *b;
  TPT_CHECK_OR_DIE(tptu_tensor_f32(&x, xv, shape, 2));
  TPT_CHECK_OR_DIE(tptu_tensor_f32(&a, ya, shape, 2));
  TPT_CHECK_OR_DIE(tptu_tensor_f32(&b, yb, shape, 2));
  const tpt_tensor *columns[] = {x, a, b};
  tpt_dataflow *rows, *batches;
  TPT_CHECK_OR_DIE(tpt_dataflow_from_tensors(&rows, columns, 3, /*shuffle=*/1));
  TPT_CHECK_OR_DIE(tpt_dataflow_batch(&batches, rows, 32, 0));
  train(batches);
  tpt_dataflow_free(rows);
  tpt_dataflow_free(batches);
  tpt_tensor_free(x);
  tpt_tensor_free(a);
  tpt_tensor_free(b);
  return 0;
}
