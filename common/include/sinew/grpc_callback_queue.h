// Keeps gRPC's process-wide callback completion queue for the life of the process.
//
// Debian's gRPC (1.51) serves the callback API (`stub->async()`, reactors) from one
// completion queue per process, reference counted by the channels that have used it:
// when the last such channel is destroyed, gRPC shuts the queue down and joins its
// threads, and the next channel that makes a callback call starts a new one. That
// teardown races the old queue's threads and aborts the process ("ref_counted.h:183
// assertion failed: prior > 0"): a sandbox client destroyed just before the next one's
// first call did it in about 1 run in 20 of AgentProcessTest.ExecuteAsync..., and a loop
// of channels coming and going in 2 of 3 runs. A harness whose last sandbox closes just
// as the next one opens is the same sequence.
//
// PinGrpcCallbackQueue() makes one callback call on a channel that is never destroyed,
// so the queue's count never reaches zero. Call it before any callback-API call (the
// clients that use one do, in their constructors).
//
// Thread safety: may be called from any thread, any number of times.
#pragma once

namespace sinew {

void PinGrpcCallbackQueue();

}  // namespace sinew
