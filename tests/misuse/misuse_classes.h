/* The misuse suite's hand-written cases, one table (misuse_classes.c). */
#ifndef TPT_MISUSE_CLASSES_H
#define TPT_MISUSE_CLASSES_H

#include <stddef.h>

typedef struct class_case {
  const char *label;
  int (*run)(void); /* 0 when the library kept its promise */
  int limit;        /* seconds before the case counts as a hang */
} class_case;

extern const class_case class_cases[];
extern const size_t n_class_cases;

#endif
