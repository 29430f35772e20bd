/*
 * tptrain/strategy.h: the training strategies' options: towers
 * (tensorpack's multi-GPU trainers), distributed jobs, the GAN trainers.
 * tpt_trainer_set_towers, _set_distributed and _set_gan (trainer.h) take
 * them.
 *
 * Part of the C ABI; include <tptrain.h>, which includes every module.
 */
#ifndef TPTRAIN_STRATEGY_H
#define TPTRAIN_STRATEGY_H

#include "common.h"

TPT_BEGIN_DECL

/* ---- Towers: data-parallel training on several devices ---------------------
 * tensorpack's multi-GPU trainers. Every step each tower takes its own batch
 * from the input (the total batch is batch x towers; steps_per_epoch counts
 * steps, and its default is the input's size / towers) and runs the tower
 * function (tpt_tower_index and tpt_tower_name say which: "tower0",
 * "tower1", ...) at the same time as the others: tower 0 on the training
 * thread, the others on threads of their own, each with its share of
 * LibTorch's intra-op threads. The tower function must therefore be safe to
 * call from several threads at once. The cost and outputs the loop reports
 * are tower 0's. Checkpoints hold tower 0's variables, as tensorpack's. */

typedef enum tpt_strategy {
  TPT_STRATEGY_SIMPLE = 0,            /* one tower (tpt_trainer_set_model) */
  TPT_STRATEGY_REPLICATED = 1,        /* SyncMultiGPUTrainerReplicated: a copy of the variables
                                         per tower, gradients all-reduced, every copy updated;
                                         non-trainable variables copied from tower 0 after
                                         every epoch */
  TPT_STRATEGY_PARAMETER_SERVER = 2,  /* SyncMultiGPUTrainerParameterServer: shared variables,
                                         the towers' gradients averaged and applied once */
  TPT_STRATEGY_ASYNC = 3,             /* AsyncMultiGPUTrainer: shared variables, each tower's
                                         gradients times 1/N applied as an update of their own */
  TPT_STRATEGY_FORCE32 = 0x7fffffff
} tpt_strategy;

/* Initialise with TPT_TOWERS_OPTIONS_INIT. */
#define TPT_TOWERS_OPTIONS_VERSION 3
typedef struct tpt_towers_options {
  uint32_t version;            /* TPT_TOWERS_OPTIONS_VERSION */
  tpt_strategy strategy;       /* default TPT_STRATEGY_REPLICATED */
  int32_t n_towers;            /* 1 to 256; default 2 */
  const char *const *devices;  /* n_towers device names; NULL (default): every tower on "cpu".
                                  A tower on another device ("cuda:1") computes on a copy of
                                  the variables, which stay on the CPU (docs/towers.md); not
                                  run on a GPU yet. TPT_ERR_UNSUPPORTED where LibTorch has no
                                  such device. In a distributed job "cuda" (no index) is this
                                  process's device: cuda:<LOCAL_RANK x n_towers + k> */
  int32_t average;             /* replicated: nonzero (default) averages the gradients, 0 sums them
                                  (the default step's; train ops always average) */
  int32_t intra_op_threads;    /* LibTorch intra-op threads per tower; 0 (default): the process's
                                  (tpt_get_num_threads) divided by n_towers, at least 1 */
  /* version 2: */
  int32_t overlap;             /* replicated and parameter server: nonzero (default) reduces a
                                  bucket of gradients as soon as every tower's backward pass has
                                  produced them, while the backward passes go on (PyTorch DDP's
                                  reducer); 0 reduces every bucket after all the backward passes.
                                  The result is the same bit for bit */
  size_t bucket_bytes;         /* the gradients are packed into flat buckets of about this size
                                  (in the order backward produces them); 0 (default): 1 MiB */
  /* version 3: */
  int32_t average_scalars;     /* nonzero: the cost and the scalar outputs the monitors and step
                                  outputs get are averaged over the towers (and over the ranks too
                                  with tpt_distributed_options.average_scalars); 0 (default):
                                  tower 0's, as tensorpack's main training tower */
} tpt_towers_options;
#define TPT_TOWERS_OPTIONS_INIT { TPT_TOWERS_OPTIONS_VERSION, TPT_STRATEGY_REPLICATED, 2, NULL, 1, 0, 1, 0, 0 }

/* ---- Distributed training: several processes -------------------------------
 * tensorpack's HorovodTrainer on LibTorch's c10d (Gloo over TCP): every
 * process (a rank) trains its towers (one by default) on its share of the
 * input, and before every update the gradients are summed over every tower
 * of every process, so N processes train as one process with N towers would.
 * Rank 0 is the chief: it alone keeps the log directory and runs chief-only
 * callbacks (checkpoints, monitors); its variables reach every rank before
 * the first step, its non-trainable ones after every epoch, and every rank
 * resumes from its checkpoint. Start the processes with tools/tptrain-run
 * (`tptrain-run -n 4 ./train ...`), torchrun, or anything that sets
 * torchrun's variables (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE,
 * LOCAL_RANK, LOCAL_WORLD_SIZE, TORCHELASTIC_RUN_ID); docs/distributed.md. */

/* Initialise with TPT_DISTRIBUTED_OPTIONS_INIT (zero fields keep the defaults). */
#define TPT_DISTRIBUTED_OPTIONS_VERSION 1
typedef struct tpt_distributed_options {
  uint32_t version;          /* TPT_DISTRIBUTED_OPTIONS_VERSION */
  const char *master_addr;   /* rank 0's host; NULL (default): MASTER_ADDR, else 127.0.0.1
                                for a one-process job (world size 1) */
  int32_t master_port;       /* its port; 0 (default): MASTER_PORT, else (or MASTER_PORT=0)
                                any free port for a one-process job */
  int32_t world_size;        /* 0 (default): WORLD_SIZE, RANK and LOCAL_RANK from the environment;
                                else the number of processes, with rank and local_rank below */
  int32_t rank;              /* with world_size: this process's, 0 to world_size - 1 */
  int32_t local_rank;        /* with world_size: its index among the processes of its machine */
  int64_t timeout_ms;        /* the rendezvous and every collective: a rank that died or hangs
                                makes the others fail after at most this, with an error naming
                                it; 0 (default): 60000. It must exceed the longest chief-only
                                work between two steps (an inference pass on rank 0) */
  int32_t shard;             /* nonzero (default): each rank takes every world_size-th batch of
                                the input (rank r the r-th of every world_size, so the job's
                                towers take the batches one process's towers would); 0: the
                                input is already this rank's share */
  int32_t average_scalars;   /* nonzero: the cost and the scalar outputs the monitors get are
                                averaged over the ranks (one more all-reduce per step);
                                0 (default): rank 0's */
} tpt_distributed_options;
#define TPT_DISTRIBUTED_OPTIONS_INIT { TPT_DISTRIBUTED_OPTIONS_VERSION, NULL, 0, 0, 0, 0, 0, 1, 0 }

/* Initialise with TPT_GAN_OPTIONS_INIT. */
#define TPT_GAN_OPTIONS_VERSION 2
typedef struct tpt_gan_options {
  uint32_t version;   /* TPT_GAN_OPTIONS_VERSION */
  int32_t separate;   /* 0 (default): GANTrainer: every run_step is one hooked run of the
                         generator's then the discriminator's update from one forward pass;
                         nonzero: SeparateGANTrainer: a hooked run of D's update when
                         global_step % d_period == 0, then one of G's when global_step %
                         g_period == 0 (global_step as it is by then: a run_step may make two
                         hooked runs, and each takes a batch) */
  int64_t d_period;   /* separate: >= 1, default 1; one of the two periods must be 1 */
  int64_t g_period;
  const char *g_op;   /* the generator's train op; NULL (default): "g_op" */
  const char *d_op;   /* the discriminator's; NULL (default): "d_op" */
  /* version 2: */
  const tpt_towers_options *towers; /* NULL (default): one tower; else tensorpack's
                         MultiGPUGANTrainer: every tower takes its own batch and each op
                         minimises its cost averaged over the towers (and over the ranks of
                         a distributed job, whatever towers->average says); the replicated or
                         the parameter-server strategy */
} tpt_gan_options;
#define TPT_GAN_OPTIONS_INIT { TPT_GAN_OPTIONS_VERSION, 0, 1, 1, NULL, NULL, NULL }

TPT_END_DECL

#endif /* TPTRAIN_STRATEGY_H */
