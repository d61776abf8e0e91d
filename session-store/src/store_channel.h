// The gRPC channel arguments of every client of a sinew-store: the store's message size,
// reconnects at least every second, and keepalive pings that find a silent connection
// dead in seconds (a remote store, a follower's stream).
#pragma once

#include <grpcpp/grpcpp.h>

namespace sinew::store {

grpc::ChannelArguments StoreChannelArgs();

}  // namespace sinew::store
