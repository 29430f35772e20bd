/* What the misuse suite's cases share: live handles of each type to pass
 * where a case does not put its NULL, writable junk for out-parameters, and
 * the check of a call that must fail. Every case runs in a forked child
 * (misuse_main.c), so nothing made here is ever freed. */
#ifndef TPT_MISUSE_COMMON_H
#define TPT_MISUSE_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "tptrain.h"

typedef struct misuse_case {
  const char *label;
  int (*run)(void); /* 0: as expected; MISUSE_* otherwise */
} misuse_case;

enum { MISUSE_SUCCEEDED = 10, MISUSE_NO_MESSAGE = 11, MISUSE_BAD_CODE = 12, MISUSE_OUT_DANGLING = 13 };

/* What an out-handle holds before a call that must fail and set it to NULL. */
#define SENTINEL ((void *)junk())

/* A case's verdict on a call that must fail: an error status (not TPT_OK,
 * not TPT_STOP) with a message. */
int expect_error(tpt_status *st);

void *junk(void);                          /* 64 KiB of zeros, writable */
const char *const *strings(void);          /* {"x"} */
const int64_t *dims(void);                 /* {2, 2, 2, 2} */
const void *const *one_of(const void *h);  /* a one-element array holding h */
tpt_tensor *mk_tensor(void);               /* f32 [2, 3] */
tpt_datapoint *mk_datapoint(void);         /* one component */
tpt_dataflow *mk_dataflow(void);           /* two rows of [3] */
tpt_trainer *mk_trainer(void);             /* default options */
tpt_model *mk_model(void);                 /* one f32 [-1, 3] input, an FC tower, built */
tpt_optimizer *mk_optimizer(void);         /* sgd */
tpt_input *mk_input(void);                 /* dummy, batch 2 */
tpt_callback *mk_callback(void);           /* does nothing */
tpt_status *mk_status(void);               /* TPT_ERR_INTERNAL "made" */
tpt_trainer_options mk_quiet_options(int64_t steps_per_epoch); /* 3 epochs, no output, no default callbacks */
tpt_trainer *mk_quiet_trainer(int64_t steps_per_epoch);         /* a trainer with those options */
tpt_model *mk_model_with(tpt_tower_fn fn); /* one f32 [-1, 3] input, sgd, not built */
/* A tower function: an FC layer of 1 unit, cost the mean of its square. */
tpt_status *cost_tower(tpt_tower *tw, const tpt_tensor *const *in, size_t n, void *ud);

/* An error status with `code` whose message contains `fragment` (freed);
 * otherwise says what came instead on stderr and returns 0. */
int is_error(tpt_status *st, tpt_code code, const char *fragment);

/* A hand-written case's check: on failure, says where and returns 1. */
#define CHECK(cond)                                                              \
  do {                                                                           \
    if (!(cond)) {                                                               \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);   \
      return 1;                                                                  \
    }                                                                            \
  } while (0)

extern const misuse_case null_cases[];
extern const size_t n_null_cases;

#endif
