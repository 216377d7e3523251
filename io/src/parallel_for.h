// The io module's one way of spreading independent items over threads (tiles, row bands, gzip blocks).
#pragma once

#include <cstddef>
#include <functional>

namespace tessera::io::detail {

// Threads for CPU-bound io work: the machine's, at most 16.
int io_threads();

// f(i) for every i in [0, n) on up to `threads` threads (the caller's among them), items taken in order;
// returns when all are done, then rethrows the exception of the lowest failed item, if any.
void parallel_for(size_t n, int threads, const std::function<void(size_t)>& f);

}  // namespace tessera::io::detail
