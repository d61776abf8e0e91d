// ModelRunner with a GGUF that carries its own tokenizer.chat_template (a random-weight
// model written by sinew_model_testing): the template is executed as Jinja, printed BOS
// is not doubled, and an unknown architecture is a load error naming it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <cstdio>

#include "model_runner.h"
#include "random_model.h"
#include "sinew/model/jinja_template.h"

namespace sinew::model {
namespace {

std::string TempPath(const std::string& tag) {
  return "/tmp/sinew-runner-" + tag + "-" + std::to_string(getpid()) + ".gguf";
}

constexpr char kTemplate[] =
    "{{ bos_token }}{% for m in messages %}<|{{ m.role }}|>\n{{ m.content | trim }}{{ eos_token }}\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}";

TEST(ModelRunnerTemplate, GgufTemplateIsRenderedAndBosNotDoubled) {
  testing::RandomModelSpec spec;
  spec.n_layer = 1;
  spec.chat_template = kTemplate;
  const std::string path = TempPath("tmpl");
  ASSERT_TRUE(testing::WriteRandomModel(spec, path).ok());
  EngineOptions options;
  options.n_threads = 1;
  options.n_ctx = 128;
  auto runner = ModelRunner::Load(path, options, "");
  std::remove(path.c_str());
  ASSERT_TRUE(runner.ok()) << runner.status().ToString();
  EXPECT_TRUE((*runner)->chat_template().is_jinja());
  EXPECT_EQ((*runner)->chat_template().name(), "jinja");

  GenerationRequest request;
  request.chat = true;
  request.messages = {{"system", " Be brief. "}, {"user", "Hi"}};
  Result<std::string> text = (*runner)->PromptText(request);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(*text, "<s><|system|>\nBe brief.</s>\n<|user|>\nHi</s>\n<|assistant|>\n");
  request.add_generation_prompt = false;
  EXPECT_EQ(*(*runner)->PromptText(request), "<s><|system|>\nBe brief.</s>\n<|user|>\nHi</s>\n");

  // The vocabulary adds BOS (SPM); the template printed it already: exactly one.
  Result<std::vector<int32_t>> tokens = (*runner)->PromptTokens(request);
  ASSERT_TRUE(tokens.ok()) << tokens.status().ToString();
  ASSERT_GE(tokens->size(), 2u);
  EXPECT_EQ((*tokens)[0], 1);
  EXPECT_NE((*tokens)[1], 1);
}

// A GGUF whose template lists a tool's parameters with dictsort, as real models' do,
// loads (it was refused: "no filter named 'dictsort'") and renders them sorted by name,
// case-insensitively.
TEST(ModelRunnerTemplate, GgufTemplateUsingDictsortLoadsAndRenders) {
  testing::RandomModelSpec spec;
  spec.n_layer = 1;
  spec.chat_template =
      "{% for tool in tools %}{{ tool.function.name }}:{% for name, p in tool.function.parameters.properties|dictsort %}"
      " {{ name }}={{ p.type }}{% endfor %}\n{% endfor %}"
      "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}";
  const std::string path = TempPath("dictsort");
  ASSERT_TRUE(testing::WriteRandomModel(spec, path).ok());
  EngineOptions options;
  options.n_threads = 1;
  options.n_ctx = 128;
  auto runner = ModelRunner::Load(path, options, "");
  std::remove(path.c_str());
  ASSERT_TRUE(runner.ok()) << runner.status().ToString();
  GenerationRequest request;
  request.chat = true;
  request.messages = {{"user", "Hi"}};
  const boost::json::object tool = boost::json::parse(R"({"type": "function", "function": {"name": "f",
      "parameters": {"type": "object", "properties": {"zeta": {"type": "string"}, "Alpha": {"type": "integer"},
      "beta": {"type": "boolean"}}}}})").as_object();
  request.tools.push_back({"f", "", tool.at("function").at("parameters"), tool});
  Result<std::string> text = (*runner)->PromptText(request);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(*text, "f: Alpha=integer beta=boolean zeta=string<|user|>Hi\n");  // trim_blocks ate a \n
}

TEST(ModelRunnerTemplate, OverrideAndParseErrors) {
  testing::RandomModelSpec spec;
  spec.n_layer = 1;
  spec.chat_template = "line one\n{% if %}";  // broken in the file
  const std::string path = TempPath("bad");
  ASSERT_TRUE(testing::WriteRandomModel(spec, path).ok());
  EngineOptions options;
  options.n_threads = 1;
  options.n_ctx = 128;
  auto broken = ModelRunner::Load(path, options, "");
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("tokenizer.chat_template"), std::string::npos);
  EXPECT_NE(broken.status().message().find("chat template line 2"), std::string::npos) << broken.status().message();
  EXPECT_NE(broken.status().message().find("--chat-template"), std::string::npos);

  auto overridden = ModelRunner::Load(path, options, "", {}, "{{ messages[0].content }}!");
  std::remove(path.c_str());
  ASSERT_TRUE(overridden.ok()) << overridden.status().ToString();
  GenerationRequest request;
  request.chat = true;
  request.messages = {{"user", "Hi"}};
  EXPECT_EQ(*(*overridden)->PromptText(request), "Hi!");
}

TEST(ModelRunnerTemplate, UnknownArchitectureNamesIt) {
  testing::RandomModelSpec spec;
  spec.arch = "mamba";
  spec.n_layer = 1;
  const std::string path = TempPath("arch");
  ASSERT_TRUE(testing::WriteRandomModel(spec, path).ok());
  auto runner = ModelRunner::Load(path, EngineOptions{}, "");
  std::remove(path.c_str());
  ASSERT_FALSE(runner.ok());
  EXPECT_NE(runner.status().message().find("architecture 'mamba' is not supported"), std::string::npos)
      << runner.status().ToString();
}

}  // namespace
}  // namespace sinew::model
