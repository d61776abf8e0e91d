#include "store_channel.h"

#include "sinew/session_store/store_service.h"

namespace sinew::store {

grpc::ChannelArguments StoreChannelArgs() {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxGrpcMessageBytes);
  args.SetMaxSendMessageSize(kMaxGrpcMessageBytes);
  // A channel of its own subchannels: a replacement must not inherit the old channel's
  // connection in reconnect backoff (gRPC shares subchannels between equal channels).
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // A channel left alone (a watch waiting, nobody calling) retries a lost server at
  // least every second, not after gRPC's backoff of up to 120 s.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // A connection cut without a word (a partition) fails its calls in seconds, which the
  // callers retry elsewhere (ConfigureStoreServer accepts these pings).
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, kKeepaliveMs);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kKeepaliveMs);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  return args;
}

}  // namespace sinew::store
