/* The smallest real tptrain program: check the library, then fit a line by
 * least squares with tensors that live in LibTorch.
 *
 * Until the trainer lands this is the README's main example. The normal
 * equations for y = a*x + b are solved through the C API's matrix product:
 * X^T X and X^T y are computed by LibTorch, the 2x2 solve is done here. */
#include <stdio.h>

#include "tptrain_util.h"

int main(void) {
  printf("%s\n", tpt_build_info());
  if (tpt_version() / 10000 != TPT_VERSION_MAJOR) {
    fprintf(stderr, "libtptrain %s does not match the header %s\n", tpt_version_string(), TPT_VERSION_STRING);
    return 1;
  }

  enum { N = 8 };
  float x_design[N * 2], xt[2 * N], y[N];
  for (int i = 0; i < N; ++i) {
    float x = (float)i;
    x_design[2 * i] = x;
    x_design[2 * i + 1] = 1.0f;
    xt[i] = x;
    xt[N + i] = 1.0f;
    y[i] = 3.0f * x - 2.0f + ((i % 2) ? 0.25f : -0.25f); /* a line with alternating noise */
  }
  const int64_t s_x[] = {N, 2}, s_xt[] = {2, N}, s_y[] = {N, 1};
  tpt_tensor *X = NULL, *Xt = NULL, *Y = NULL, *XtX = NULL, *XtY = NULL;
  TPT_CHECK_OR_DIE(tptu_tensor_f32(&X, x_design, s_x, 2));
  TPT_CHECK_OR_DIE(tptu_tensor_f32(&Xt, xt, s_xt, 2));
  TPT_CHECK_OR_DIE(tptu_tensor_f32(&Y, y, s_y, 2));
  TPT_CHECK_OR_DIE(tpt_tensor_matmul(&XtX, Xt, X));
  TPT_CHECK_OR_DIE(tpt_tensor_matmul(&XtY, Xt, Y));
  TPT_CHECK_OR_DIE(tptu_tensor_print(stdout, "X^T X", XtX));
  TPT_CHECK_OR_DIE(tptu_tensor_print(stdout, "X^T y", XtY));

  float m[4], v[2];
  TPT_CHECK_OR_DIE(tpt_tensor_copy_to(m, sizeof m, XtX));
  TPT_CHECK_OR_DIE(tpt_tensor_copy_to(v, sizeof v, XtY));
  double det = (double)m[0] * m[3] - (double)m[1] * m[2];
  double a = (m[3] * v[0] - m[1] * v[1]) / det;
  double b = (m[0] * v[1] - m[2] * v[0]) / det;
  printf("least squares fit: y = %.4f * x + %.4f (data drawn from y = 3 x - 2)\n", a, b);

  tpt_tensor_free(XtY);
  tpt_tensor_free(XtX);
  tpt_tensor_free(Y);
  tpt_tensor_free(Xt);
  tpt_tensor_free(X);
  return (a > 2.9 && a < 3.1 && b > -2.3 && b < -1.7) ? 0 : 1;
}
