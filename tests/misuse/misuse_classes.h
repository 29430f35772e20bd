/* The misuse suite's hand-written cases, one table (misuse_classes.c). */
#ifndef TPT_MISUSE_CLASSES_H
#define TPT_MISUSE_CLASSES_H

#include <stddef.h>

typedef struct class_case {
  const char *label;
  int (*run)(void); /* 0 when the library kept its promise */
  int limit;        /* seconds before the case counts as a hang */
} class_case;

extern const class_case class_cases[];   /* misuse_classes.c */
extern const size_t n_class_cases;
extern const class_case matrix_cases[];  /* misuse_matrix.c: the trainer's own run, from every site */
extern const size_t n_matrix_cases;
extern const class_case thread_cases[];  /* misuse_threads.c: threads the system refuses */
extern const size_t n_thread_cases;

#endif
