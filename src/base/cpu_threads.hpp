// tptrain's threads on the CPU (docs/threading.md, "How many threads"), set
// when libtptrain is loaded:
//
// - LibTorch's intra-op threads: one per physical core this process may run
//   on (its CPU affinity, hyperthreads of one core counted once, at most its
//   cgroup's CPU quota), unless OMP_NUM_THREADS or MKL_NUM_THREADS is set
//   (LibTorch follows them) or the count was changed before libtptrain was
//   loaded. LibTorch 1.13's own default is half the logical CPUs on x86-64,
//   assuming two hyperthreads per core: one thread on a 2-core virtual
//   machine, where the other core idled (LibTorch 2.x counts cores itself,
//   and this changes nothing there).
// - The BLAS: MKL and an OpenMP build of OpenBLAS (Debian's
//   libopenblas0-openmp) run on OpenMP's threads, the pool LibTorch's
//   operators use, sized by the count above. A pthread build of OpenBLAS
//   (libopenblas0-pthread) has a pool of its own, one thread per core, that
//   LibTorch never sizes; its idle threads spin (sched_yield) for a while
//   after each product, on the cores OpenMP's threads are using, and
//   OpenMP's idle threads spin against its workers: with two of each on two
//   cores, a float32 MLP's step took 2.2x as long as with one pool. So
//   tptrain runs such an OpenBLAS on one thread, the caller's (its products
//   are then single-threaded: libopenblas0-openmp gives them the intra-op
//   threads, and the trainer says so in its log). TPT_BLAS_POOL=keep in the
//   environment leaves that pool alone.
//
// Nothing here links to a BLAS: its functions are looked up in what the
// process has loaded.
#pragma once

#include <string>

namespace tpt {

// Physical cores this process may run on: the CPUs of its affinity mask,
// one per core (sysfs topology), at most its cgroup's CPU quota rounded up;
// at least 1.
int usable_cores();

// CPUs a cgroup v2 `cpu.max` line allows ("150000 100000": 2, quota over
// period rounded up); 0 for no limit ("max 100000") or a line not understood.
int cgroup_cpu_limit(const std::string &cpu_max);

// The BLAS as tptrain sees it, for tpt_build_info: "OpenBLAS 0.3.21 ...:
// OpenMP's threads" and the like.
std::string blas_description();

// A line for the trainer's log where the BLAS products cannot use the
// intra-op threads (a pthread OpenBLAS kept at one thread while LibTorch has
// more), else empty.
std::string blas_threads_note();

}  // namespace tpt
