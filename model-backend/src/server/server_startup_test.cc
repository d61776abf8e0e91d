// sinew-model refuses bad start-up input with a clear message and a non-zero exit.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "server_test_util.h"

namespace sinew::model {
namespace {

using testing::RunServerToExit;

std::string TempFileWith(const std::string& bytes) {
  char path[] = "/tmp/sinew-model-startup-XXXXXX";
  int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  close(fd);
  return path;
}

TEST(ServerStartup, MissingModelFile) {
  std::string output;
  EXPECT_EQ(RunServerToExit({"--model", "/nonexistent/model.gguf", "--port", "0"}, &output), 1);
  EXPECT_NE(output.find("/nonexistent/model.gguf"), std::string::npos) << output;
}

TEST(ServerStartup, TruncatedAndGarbageModels) {
  std::ifstream in(testing::StoriesPath(), std::ios::binary);
  std::stringstream whole;
  whole << in.rdbuf();
  for (const std::string& bytes :
       {whole.str().substr(0, 4096), std::string("GGUF\x03garbage"), std::string(100, 'x')}) {
    std::string path = TempFileWith(bytes);
    std::string output;
    EXPECT_EQ(RunServerToExit({"--model", path, "--port", "0", "--grpc-port", "-1"}, &output), 1)
        << output;
    EXPECT_NE(output.find("sinew-model: "), std::string::npos) << output;
    std::remove(path.c_str());
  }
}

TEST(ServerStartup, UnreadableDraftModel) {
  const std::string path = TempFileWith("GGUF\x03garbage");
  std::string output;
  EXPECT_EQ(RunServerToExit({"--model", testing::StoriesPath(), "--draft-model", path, "--port",
                             "0", "--grpc-port", "-1"},
                            &output),
            1)
      << output;
  EXPECT_NE(output.find(path), std::string::npos) << output;
  std::remove(path.c_str());
  output.clear();
  EXPECT_NE(RunServerToExit({"--model", testing::StoriesPath(), "--draft-model",
                             "/nonexistent/draft.gguf", "--port", "0"},
                            &output),
            0);
  EXPECT_NE(output.find("/nonexistent/draft.gguf"), std::string::npos) << output;
}

TEST(ServerStartup, BadFlags) {
  std::string output;
  EXPECT_NE(RunServerToExit({"--port", "0"}, &output), 0) << "--model is required";
  EXPECT_NE(output.find("--model"), std::string::npos) << output;
  output.clear();
  EXPECT_EQ(RunServerToExit(
                {"--model", testing::StoriesPath(), "--host", "not-an-ip", "--port", "0"}, &output),
            1);
  EXPECT_NE(output.find("not-an-ip"), std::string::npos) << output;
}

// Plain HTTP is served on loopback only, unless --insecure says otherwise.
TEST(ServerStartup, PlainHttpOffLoopbackNeedsInsecure) {
  std::string output;
  EXPECT_EQ(RunServerToExit({"--model", testing::StoriesPath(), "--host", "0.0.0.0", "--port", "0",
                             "--grpc-port", "-1"},
                            &output),
            2);
  EXPECT_NE(output.find("--insecure"), std::string::npos) << output;
  EXPECT_NE(output.find("0.0.0.0"), std::string::npos) << output;
}

// A device this build or machine lacks, or a bad cache type, is a clear start-up error.
TEST(ServerStartup, BadDeviceAndCacheType) {
  std::string output;
  EXPECT_EQ(RunServerToExit({"--model", testing::StoriesPath(), "--port", "0", "--grpc-port", "-1",
                             "--device", "cuda:63"},
                            &output),
            1)
      << "no GPU here (a machine with one runs the gpu-labelled tests instead)";
  EXPECT_NE(output.find("CUDA"), std::string::npos) << output;
  output.clear();
  EXPECT_EQ(RunServerToExit({"--model", testing::StoriesPath(), "--port", "0", "--device", "tpu"},
                            &output),
            1);
  EXPECT_NE(output.find("unknown device 'tpu'"), std::string::npos) << output;
  output.clear();
  EXPECT_EQ(RunServerToExit(
                {"--model", testing::StoriesPath(), "--port", "0", "--cache-type-k", "q4_k"},
                &output),
            2);
  EXPECT_NE(output.find("unknown KV cache type 'q4_k'"), std::string::npos) << output;
}

TEST(ServerStartup, PortAlreadyInUse) {
  std::string error;
  auto first = testing::ServerProcess::Start({}, &error);
  ASSERT_NE(first, nullptr) << error;
  std::string output;
  EXPECT_EQ(RunServerToExit({"--model", testing::StoriesPath(), "--port",
                             std::to_string(first->http_port()), "--grpc-port", "-1"},
                            &output),
            1);
  EXPECT_NE(output.find("cannot listen"), std::string::npos) << output;
  output.clear();
  EXPECT_EQ(RunServerToExit({"--model", testing::StoriesPath(), "--port", "0", "--grpc-port",
                             std::to_string(first->grpc_port())},
                            &output),
            1);
  EXPECT_NE(output.find("cannot listen for gRPC"), std::string::npos) << output;
}

}  // namespace
}  // namespace sinew::model
