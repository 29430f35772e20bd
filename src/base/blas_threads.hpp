// The BLAS's own thread pool (OpenBLAS built with pthreads, as Debian's
// libopenblas0-pthread): LibTorch calls it for matrix products (linear
// layers, some convolutions) but never sets its size, so it keeps one thread
// per core beside LibTorch's OpenMP pool, and its idle threads spin
// (sched_yield) for a while after each call. Two towers on two cores, each
// asking it for every core at once, took turns in it and ran 1.39x slower
// for it (docs/threading.md, "The BLAS's threads").
//
// Nothing here links to a BLAS: the functions are looked up in what the
// process has loaded. Without OpenBLAS, or with an OpenMP OpenBLAS (which
// follows OpenMP's per-thread count, as LibTorch sets it), all of it does
// nothing; so does TPT_BLAS_POOL=keep in the environment (read at each call).
#pragma once

namespace tpt {

// Sizes the BLAS's own pool (tpt_set_num_threads: LibTorch's intra-op count
// and the BLAS's are one setting, as LibTorch sets MKL's). While towers run
// (below), the size is kept and applied when the last of them stops.
void set_blas_pool_threads(int n);

// While one lives (towers running on threads), the BLAS's pool has one
// thread: each caller's products run on the caller's thread, so concurrent
// towers neither queue for the pool nor spin against each other. Nestable
// and thread-safe; the last one gone restores the size.
class SingleThreadedBlas {
 public:
  SingleThreadedBlas();
  ~SingleThreadedBlas();
  SingleThreadedBlas(const SingleThreadedBlas &) = delete;
  SingleThreadedBlas &operator=(const SingleThreadedBlas &) = delete;

 private:
  bool active_ = false;
};

}  // namespace tpt
