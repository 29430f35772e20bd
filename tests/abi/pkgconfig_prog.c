/* Built by check_pkgconfig.sh with `cc prog.c $(pkg-config --cflags --libs tptrain)`. */
#include <stdio.h>
#include <tptrain.h>

int main(void) {
  const float x[] = {1, 2, 3, 4};
  const int64_t shape[] = {2, 2};
  tpt_tensor *t = NULL, *p = NULL;
  tpt_status *st = tpt_tensor_from_data(&t, x, sizeof x, shape, 2, NULL);
  if (!st) st = tpt_tensor_matmul(&p, t, t);
  float out[4] = {0};
  if (!st) st = tpt_tensor_copy_to(out, sizeof out, p);
  if (st) {
    fprintf(stderr, "error: %s\n", tpt_status_message(st));
    tpt_status_free(st);
    return 1;
  }
  printf("tptrain %s: [[1,2],[3,4]]^2 = [[%g,%g],[%g,%g]]\n", tpt_version_string(), out[0], out[1], out[2], out[3]);
  tpt_tensor_free(p);
  tpt_tensor_free(t);
  return out[0] == 7 && out[3] == 22 ? 0 : 1;
}
