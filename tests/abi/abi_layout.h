/* Shared by abi_c11.c and abi_cpp17.cpp: the ABI facts that must never change
 * within one TPT_ABI_VERSION. Each check prints one TAP line. Adding a field at
 * the end of a struct grows the expected size here; moving one is a break. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "tptrain.h"

static int abi_n, abi_failed;

static void abi_check(int ok, const char *what) {
  ++abi_n;
  if (!ok) abi_failed = 1;
  printf("%s %d - %s\n", ok ? "ok" : "not ok", abi_n, what);
}

#define ABI_EQ(a, b) abi_check((long long)(a) == (long long)(b), #a " == " #b)

static int abi_run(const char *lang) {
  printf("TAP version 13\n# header compiled as %s with -Wall -Wextra -Werror -pedantic\n", lang);
  /* enum values are part of the ABI */
  ABI_EQ(TPT_OK, 0);
  ABI_EQ(TPT_ERR_INVALID_ARGUMENT, 1);
  ABI_EQ(TPT_ERR_OUT_OF_MEMORY, 2);
  ABI_EQ(TPT_ERR_BACKEND, 3);
  ABI_EQ(TPT_ERR_INTERNAL, 4);
  ABI_EQ(TPT_ERR_UNKNOWN, 5);
  ABI_EQ(TPT_ERR_CALLBACK, 6);
  ABI_EQ(TPT_ERR_IO, 7);
  ABI_EQ(TPT_ERR_STATE, 8);
  ABI_EQ(TPT_ERR_UNSUPPORTED, 9);
  ABI_EQ(TPT_FEATURE_GLOO, 1);
  ABI_EQ(TPT_FEATURE_CUDA, 2);
  ABI_EQ(TPT_FEATURE_NCCL, 3);
  ABI_EQ(TPT_DTYPE_F32, 1);
  ABI_EQ(TPT_DTYPE_F64, 2);
  ABI_EQ(TPT_DTYPE_F16, 3);
  ABI_EQ(TPT_DTYPE_BF16, 4);
  ABI_EQ(TPT_DTYPE_I64, 5);
  ABI_EQ(TPT_DTYPE_I32, 6);
  ABI_EQ(TPT_DTYPE_U8, 7);
  ABI_EQ(TPT_DTYPE_BOOL, 8);
  /* enums are 32-bit */
  ABI_EQ(sizeof(tpt_code), 4);
  ABI_EQ(sizeof(tpt_dtype), 4);
  ABI_EQ(sizeof(tpt_feature), 4);
  /* versioned option structs: version first, fields only appended */
  ABI_EQ(TPT_TENSOR_OPTIONS_VERSION, 1);
  ABI_EQ(offsetof(tpt_tensor_options, version), 0);
  ABI_EQ(offsetof(tpt_tensor_options, dtype), 4);
  ABI_EQ(offsetof(tpt_tensor_options, device), 8);
  ABI_EQ(offsetof(tpt_tensor_options, requires_grad), 8 + sizeof(void *));
  ABI_EQ(sizeof(tpt_tensor_options), 8 + 2 * sizeof(void *));
  {
    tpt_tensor_options o = TPT_TENSOR_OPTIONS_INIT;
    ABI_EQ(o.version, TPT_TENSOR_OPTIONS_VERSION);
    ABI_EQ(o.dtype, TPT_DTYPE_F32);
    abi_check(o.device == NULL, "TPT_TENSOR_OPTIONS_INIT device is NULL");
    ABI_EQ(o.requires_grad, 0);
  }
  /* header and library agree */
  ABI_EQ(tpt_version(), TPT_VERSION_NUMBER);
  ABI_EQ(tpt_abi_version(), TPT_ABI_VERSION);
  abi_check(strcmp(tpt_version_string(), TPT_VERSION_STRING) == 0, "version string");
  printf("1..%d\n", abi_n);
  return abi_failed;
}
