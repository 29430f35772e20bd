/* The Fashion-MNIST example as it was before tptrain kept freed memory
 * itself: the same program (examples/c/fashion_mnist.c, included) with the
 * mallopt lines it used to carry at the start of main. benchmarks/run
 * fashion-mnist runs it with TPT_CPU_ALLOCATOR=system (c10's own allocator)
 * as the baseline of the example as a user now writes it. */
#include <malloc.h>

#define main example_main
#include "../examples/c/fashion_mnist.c"
#undef main

int main(int argc, char **argv) {
  mallopt(M_MMAP_THRESHOLD, 32 << 20); /* glibc's maximum */
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_TOP_PAD, 64 << 20);
  return example_main(argc, argv);
}
