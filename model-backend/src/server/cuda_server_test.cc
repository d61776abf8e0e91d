// The real sinew-model process serving stories260K on the GPU (label gpu): 64
// concurrent SSE streams complete with the text each prompt gets alone, and
// the server reports its device. Skipped, with the reason, without a GPU.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <thread>

#include "server_test_util.h"
#include "sinew/model/backend.h"

namespace sinew::model {
namespace {

namespace json = boost::json;
using testing::HttpCall;
using testing::ServerProcess;
using testing::SseData;

std::string Body(const std::string& prompt, bool stream) {
  return json::serialize(json::object{{"prompt", prompt},
                                      {"max_tokens", 32},
                                      {"temperature", 0},
                                      {"ignore_eos", true},
                                      {"stream", stream}});
}

TEST(CudaServer, SixtyFourStreamsCompleteWithTheSingleRequestText) {
  auto probe = CreateCudaBackend(CudaBackendOptions{0});
  if (!probe.ok()) GTEST_SKIP() << "no GPU: " << probe.status().ToString();
  probe->reset();
  std::string error;
  auto server =
      ServerProcess::Start({"--device", "cuda", "--max-running", "64", "--queue", "128"}, &error);
  ASSERT_NE(server, nullptr) << error;
  const uint16_t port = server->http_port();

  const std::string models = HttpCall(port, "GET", "/v1/models").body;
  EXPECT_NE(models.find("\"device\":\"cuda:0\""), std::string::npos) << models;
  const std::string metrics = HttpCall(port, "GET", "/metrics").body;
  EXPECT_NE(metrics.find("sinew_model_device_info{device=\"cuda:0\""), std::string::npos);

  std::vector<std::string> prompts;
  const char* starts[] = {"Once upon a time", "Tom had a dog",  "The sun was", "Lily and Ben",
                          "One day a bird",   "The little cat", "Mom said",    "A big red ball"};
  for (int i = 0; i < 64; ++i) {
    prompts.push_back(std::string(starts[i % 8]) + std::string(static_cast<size_t>(i / 8), '!'));
  }
  std::vector<std::string> expected;
  for (const std::string& p : prompts) {
    const testing::HttpResult r = HttpCall(port, "POST", "/v1/completions", Body(p, false));
    ASSERT_EQ(r.status, 200) << r.body;
    expected.push_back(std::string(json::parse(r.body).at("choices").at(0).at("text").as_string()));
  }
  std::vector<std::string> streamed(prompts.size());
  std::vector<char> finished(prompts.size(), 0);  // not vector<bool>: one thread each
  std::vector<std::thread> threads;
  for (size_t i = 0; i < prompts.size(); ++i) {
    threads.emplace_back([&, i] {
      const testing::HttpResult r =
          HttpCall(port, "POST", "/v1/completions", Body(prompts[i], true));
      if (r.status != 200) return;
      std::vector<std::string> events = SseData(r.body);
      if (events.empty() || events.back() != "[DONE]") return;
      events.pop_back();
      for (const std::string& e : events) {
        const json::value chunk = json::parse(e);
        const json::value& choice = chunk.at("choices").at(0);
        streamed[i] += std::string(choice.at("text").as_string());
        if (!choice.at("finish_reason").is_null()) finished[i] = 1;
      }
    });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_TRUE(finished[i]) << "stream " << i << " did not finish";
    EXPECT_EQ(streamed[i], expected[i]) << "stream " << i;
  }
}

}  // namespace
}  // namespace sinew::model
