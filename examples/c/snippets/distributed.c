/* docs/distributed.md: one rank of a job started by tools/tptrain-run
 * (tensorpack's HorovodTrainer): `tptrain-run -n 2 snippet_distributed`.
 * The part between the [doc] markers is shown in the page (checked by the
 * doc-snippets test); the whole program is built and run by the examples
 * test. */
#include <stdio.h>

#include "tptrain_util.h"

enum { ROWS = 256 };

/* y = w x + b. */
static tpt_status *tower(tpt_tower *tw, const tpt_tensor *const *in, size_t n, void *user_data) {
  (void)n, (void)user_data;
  tpt_tensor *y, *cost;
  TPT_RETURN_IF_ERROR(tpt_layer_fc(&y, tw, "fc", in[0], 1, NULL));
  TPT_RETURN_IF_ERROR(tpt_loss_mse(&cost, y, in[1]));
  return tpt_tower_set_cost(tw, cost);
}

static double variable(tpt_model *model, const char *name) {
  tpt_tensor *v = NULL;
  double value = 0;
  TPT_CHECK_OR_DIE(tpt_model_variable(&v, model, name));
  TPT_CHECK_OR_DIE(tpt_tensor_item(&value, v));
  tpt_tensor_free(v);
  return value;
}

// [doc]
/* Every rank runs this program: the same model, data and seed. */
static void train(tpt_model *model, tpt_dataflow *batches) {
  tpt_distributed_options dist = TPT_DISTRIBUTED_OPTIONS_INIT; /* all from tptrain-run's variables */
  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
  o.max_epoch = 5;
  o.progress = TPT_PROGRESS_OFF;
  tpt_train_config cfg = TPT_TRAIN_CONFIG_INIT;
  cfg.options = &o;
  cfg.model = model;
  cfg.dataflow = batches;  /* each rank takes every world_size-th batch */
  cfg.distributed = &dist; /* NULL: this process alone */
  tpt_trainer *t = NULL;
  TPT_CHECK_OR_DIE(tpt_trainer_from_config(&t, &cfg)); /* joins the job: waits for every rank */
  TPT_CHECK_OR_DIE(tpt_trainer_run(t));  /* gradients averaged over the ranks every step */
  int32_t rank = 0, size = 0;
  int64_t steps = 0;
  TPT_CHECK_OR_DIE(tpt_trainer_rank(&rank, &size, t));
  TPT_CHECK_OR_DIE(tpt_trainer_global_step(&steps, t));
  printf("rank %d of %d, %lld steps: y = %.2f x + %.2f\n", rank, size, (long long)steps,
         variable(model, "fc/W"), variable(model, "fc/b")); /* the same on every rank */
  tpt_trainer_free(t);
}
// [/doc]

/* Rows of y = 3 x + 2, x spread evenly over [-1, 1), in batches of 16. */
int main(void) {
  float xv[ROWS], yv[ROWS];
  for (int i = 0; i < ROWS; ++i) {
    xv[i] = (float)(2 * i - ROWS) / ROWS;
    yv[i] = 3 * xv[i] + 2;
  }
  TPT_CHECK_OR_DIE(tpt_manual_seed(0));
  const int64_t shape[] = {ROWS, 1}, free_shape[] = {-1, 1};
  tpt_tensor *x, *y;
  TPT_CHECK_OR_DIE(tptu_tensor_f32(&x, xv, shape, 2));
  TPT_CHECK_OR_DIE(tptu_tensor_f32(&y, yv, shape, 2));
  const tpt_tensor *columns[] = {x, y};
  tpt_dataflow *rows, *batches;
  TPT_CHECK_OR_DIE(tpt_dataflow_from_tensors(&rows, columns, 2, /*shuffle=*/1));
  TPT_CHECK_OR_DIE(tpt_dataflow_batch(&batches, rows, 16, 0));
  tpt_input_spec spec[] = {{"x", TPT_DTYPE_F32, free_shape, 2}, {"y", TPT_DTYPE_F32, free_shape, 2}};
  tpt_model *model = NULL;
  tpt_optimizer *sgd = NULL;
  TPT_CHECK_OR_DIE(tpt_model_new(&model, spec, 2, tower, NULL, NULL));
  TPT_CHECK_OR_DIE(tpt_optimizer_new(&sgd, "sgd"));
  TPT_CHECK_OR_DIE(tpt_optimizer_set(sgd, "learning_rate", 0.3));
  TPT_CHECK_OR_DIE(tpt_model_set_optimizer(model, sgd));
  train(model, batches);
  tpt_model_free(model);
  tpt_optimizer_free(sgd);
  tpt_dataflow_free(rows);
  tpt_dataflow_free(batches);
  tpt_tensor_free(x);
  tpt_tensor_free(y);
  return 0;
}
