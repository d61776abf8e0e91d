// The abort PinGrpcCallbackQueue (common/include/sinew/grpc_callback_queue.h) prevents,
// run for real: channels that make a callback call (as the sandbox client's ExecuteAsync
// does, letting the call's state go on gRPC's callback thread) and are destroyed, one
// after another. The server is synchronous, so only the channels hold gRPC's callback
// queue. Each run is a child process, forked before gRPC starts, since the failure is an
// abort. Without the pin the loop aborts ("ref_counted.h:183 assertion failed: prior >
// 0"); SINEW_GRPC_PIN_TEST_WITHOUT_PIN=1 runs it so, to see the failure.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <future>
#include <memory>

#include "sinew/grpc_callback_queue.h"
#include "sinew/proto/sandbox.grpc.pb.h"

namespace sinew::sandbox {
namespace {

class Answering final : public v1::Sandbox::Service {
  grpc::Status Execute(grpc::ServerContext*, const v1::ExecuteRequest* request,
                       v1::ExecuteResult* result) override {
    result->set_output(request->name());
    return grpc::Status::OK;
  }
};

struct Call {
  grpc::ClientContext context;
  v1::ExecuteRequest request;
  v1::ExecuteResult result;
  std::promise<bool> done;
};

// In the child: `channels` in-process channels, each making one callback call and then
// destroyed. Exit status 0 when every call answered.
[[noreturn]] void ChannelsComeAndGo(int channels, bool pin) {
  if (pin) PinGrpcCallbackQueue();
  Answering service;
  grpc::ServerBuilder builder;
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) _exit(3);
  for (int i = 0; i < channels; ++i) {
    auto stub = v1::Sandbox::NewStub(server->InProcessChannel(grpc::ChannelArguments()));
    auto call = std::make_shared<Call>();
    call->request.set_name("echo");
    std::future<bool> done = call->done.get_future();
    stub->async()->Execute(&call->context, &call->request, &call->result,
                           [call](grpc::Status s) {
                             call->done.set_value(s.ok() && call->result.output() == "echo");
                           });
    call.reset();  // the last reference goes with the callback, on gRPC's thread
    if (!done.get()) _exit(4);
    stub.reset();  // and the channel with it
  }
  server->Shutdown();
  _exit(0);
}

TEST(GrpcCallbackQueueTest, ChannelsComingAndGoingNeverAbortOnceThePinIsTaken) {
  const bool pin = std::getenv("SINEW_GRPC_PIN_TEST_WITHOUT_PIN") == nullptr;
  for (int run = 0; run < 3; ++run) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) ChannelsComeAndGo(2000, pin);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status)) << "run " << run << ": the child died of signal "
                                   << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    EXPECT_EQ(WEXITSTATUS(status), 0) << "run " << run;
  }
}

}  // namespace
}  // namespace sinew::sandbox
