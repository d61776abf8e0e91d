// Seeding a follower from a checkpoint of its primary (docs/session-store.md, "Replicating
// a shard"): the primary streams a fresh RocksDB checkpoint's files in bounded chunks; the
// follower checks every file's size and SHA-256 and swaps the copy in for its directory in
// one step.
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <string>
#include <vector>

#include "rocks_store.h"
#include "sinew/proto/store_replication.grpc.pb.h"
#include "sinew/status.h"

namespace sinew::store {

// The most bytes one SeedChunk carries.
inline constexpr size_t kSeedChunkBytes = 1u << 20;

// Primary side: checkpoints `store` into `scratch_dir` (which must not exist; removed
// again before returning) and writes the manifest and the files' bytes to `out`.
Status ServeSeed(RocksStore* store, const std::string& scratch_dir, grpc::ServerWriter<v1::SeedChunk>* out);

// Follower side: reads a seed from `in` into `dir`.seeding, checks it against its
// manifest, moves the files named in `keep_files` (markers such as SHARD) from `dir` into
// it, and exchanges it with `dir` atomically (renameat2 RENAME_EXCHANGE; a plain rename
// when `dir` does not exist); the old directory is then removed. Nothing may have `dir`
// open. Returns the manifest's sequence number. On any error `dir` is left as it was.
Result<uint64_t> ReceiveSeed(grpc::ClientReader<v1::SeedChunk>* in, const std::string& dir,
                             const std::vector<std::string>& keep_files);

}  // namespace sinew::store
