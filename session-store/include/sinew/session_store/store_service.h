// StoreService: the gRPC face (sinew.v1.SessionStore) of any SessionStore.
//
// Ownership: borrows the store, which must outlive the service.
// Thread-safety: gRPC calls the handlers from many threads; the store is thread-safe.
#pragma once

#include <memory>

#include <grpcpp/grpcpp.h>

#include "sinew/proto/session_store.grpc.pb.h"
#include "sinew/session_store/session_store.h"

namespace sinew::store {

// Creates the service; register it with a grpc::ServerBuilder.
std::unique_ptr<v1::SessionStore::Service> NewStoreService(SessionStore* store);

// The largest gRPC message the server and clients accept: an append of events up to the
// store's event size limit, with room for the envelope.
inline constexpr int kMaxGrpcMessageBytes = 64 << 20;

// Settings of every server of a sinew-store: kMaxGrpcMessageBytes both ways, and the
// keepalive pings of its clients and followers accepted (every 2 s, calls or not), so
// that each side of a connection cut without a word (a network partition) finds it dead
// in seconds, not after its calls' deadlines or TCP's minutes.
void ConfigureStoreServer(grpc::ServerBuilder* builder);
// The keepalive both sides ping with: every kKeepaliveMs, dead after kKeepaliveMs unanswered.
inline constexpr int kKeepaliveMs = 2000;

}  // namespace sinew::store
