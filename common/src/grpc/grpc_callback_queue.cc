#include "sinew/grpc_callback_queue.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <memory>
#include <mutex>

namespace sinew {
namespace {

// What the pinning call uses, alive until the process ends (never destroyed: destroying
// it at exit would run the very teardown it exists to avoid).
struct Pin {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<grpc::GenericStub> stub;
  grpc::ClientContext context;
  grpc::Slice slice{"", 0};
  grpc::ByteBuffer request{&slice, 1};
  grpc::ByteBuffer response;
};

}  // namespace

void PinGrpcCallbackQueue() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto* pin = new Pin;
    // A channel that never connects: the call fails at once, but starting it is what
    // takes the channel's reference on the callback queue.
    pin->channel = grpc::CreateChannel("unix:/nonexistent/sinew-grpc-callback-queue-pin",
                                       grpc::InsecureChannelCredentials());
    pin->stub = std::make_unique<grpc::GenericStub>(pin->channel);
    pin->stub->UnaryCall(&pin->context, "/sinew.Pin/Pin", grpc::StubOptions(), &pin->request,
                         &pin->response, [](grpc::Status) {});
  });
}

}  // namespace sinew
