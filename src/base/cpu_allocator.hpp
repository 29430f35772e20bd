// tptrain's CPU allocator for LibTorch tensors: keeps freed blocks for reuse.
//
// glibc gives large freed blocks back to the system at once (above its mmap
// threshold they are unmapped, and the heap's top is trimmed), so a training
// step that frees and allocates the same activations every time faults all
// their pages in again: a user's CNN ran 3x slower from its second epoch on
// (docs/dataflow.md, "Memory"). This allocator, registered with c10 for the
// CPU when libtptrain is loaded, keeps freed blocks of 16 KiB and more in size
// classes (four per power of two) and hands them out again; the host's malloc
// is never touched. Free blocks kept are bounded (an eighth of the physical
// memory, at most 2 GiB); a block that would go over is given back.
// TPT_CPU_ALLOCATOR=system in the environment leaves c10's allocator alone.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tpt::model {

struct CpuAllocatorStats {
  bool installed = false;      // registered with c10 as the CPU allocator
  uint64_t hits = 0;           // allocations served from kept blocks
  uint64_t misses = 0;         // allocations of 16 KiB or more that found none
  uint64_t cached_bytes = 0;   // bytes in kept free blocks now
  uint64_t cache_limit = 0;    // the bound on cached_bytes
};

// Registers the allocator with c10 (once; later calls do nothing) unless
// TPT_CPU_ALLOCATOR=system. Returns whether it is registered.
bool install_cpu_allocator();
CpuAllocatorStats cpu_allocator_stats();
// Gives every kept free block back to the system.
void release_cached_cpu_memory();
// Sets the bound on kept free bytes, giving back what is over it.
void set_cpu_cache_limit(uint64_t bytes);

}  // namespace tpt::model
