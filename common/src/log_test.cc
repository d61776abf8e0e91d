#include "sinew/log.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <boost/json.hpp>
#include <regex>
#include <sstream>

#include "sinew/trace.h"

namespace sinew::logging {
namespace {

// A logger writing into `out` through the formatter under test.
std::shared_ptr<spdlog::logger> LoggerInto(std::ostringstream* out, LogFormat format) {
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_st>(*out);
  auto logger = std::make_shared<spdlog::logger>("test", sink);
  logger->set_formatter(MakeFormatter(format, "sinew-test"));
  logger->set_level(spdlog::level::trace);
  return logger;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(JsonLogTest, EveryLineIsOneJsonObjectWithTheFixedFields) {
  std::ostringstream out;
  auto logger = LoggerInto(&out, LogFormat::kJson);
  logger->info("plain message {}", 1);
  logger->warn("second");
  logger->debug("third");
  const auto lines = Lines(out.str());
  ASSERT_EQ(lines.size(), 3u);
  const std::regex rfc3339(R"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z)");
  for (const auto& line : lines) {
    boost::system::error_code ec;
    auto v = boost::json::parse(line, ec);
    ASSERT_FALSE(ec) << line;
    const auto& o = v.as_object();
    EXPECT_TRUE(std::regex_match(std::string(o.at("ts").as_string()), rfc3339)) << line;
    EXPECT_EQ(o.at("component").as_string(), "sinew-test");
    EXPECT_TRUE(o.at("pid").is_int64());
    EXPECT_FALSE(o.contains("session")) << "no context, no session field: " << line;
    EXPECT_FALSE(o.contains("trace_id")) << line;
  }
  auto first = boost::json::parse(lines[0]).as_object();
  EXPECT_EQ(first.at("msg").as_string(), "plain message 1");
  EXPECT_EQ(first.at("level").as_string(), "info");
  EXPECT_EQ(boost::json::parse(lines[1]).at("level").as_string(), "warning");
  EXPECT_EQ(boost::json::parse(lines[2]).at("level").as_string(), "debug");
}

TEST(JsonLogTest, ContextFieldsAppearOnLinesLoggedInTheirScope) {
  std::ostringstream out;
  auto logger = LoggerInto(&out, LogFormat::kJson);
  {
    LogFields f;
    f.session = "0192f3a1b2c3d4e5f60718293a4b5c6d";
    f.trace_id = TraceIdForSession(f.session);
    f.span_id = "00f067aa0ba902b7";
    f.extra = {{"call_id", "c-1"}, {"msg", "must not replace the message"}};
    ScopedLogContext ctx(f);
    SetLogSeq(12);
    logger->info("inside");
  }
  logger->info("outside");
  const auto lines = Lines(out.str());
  ASSERT_EQ(lines.size(), 2u);
  auto in = boost::json::parse(lines[0]).as_object();
  EXPECT_EQ(in.at("msg").as_string(), "inside");
  EXPECT_EQ(in.at("session").as_string(), "0192f3a1b2c3d4e5f60718293a4b5c6d");
  EXPECT_EQ(in.at("trace_id").as_string(), "0192f3a1b2c3d4e5f60718293a4b5c6d");
  EXPECT_EQ(in.at("span_id").as_string(), "00f067aa0ba902b7");
  EXPECT_EQ(in.at("seq").to_number<uint64_t>(), 12u);
  EXPECT_EQ(in.at("call_id").as_string(), "c-1");
  auto outside = boost::json::parse(lines[1]).as_object();
  EXPECT_FALSE(outside.contains("session"));
  EXPECT_FALSE(outside.contains("seq"));
}

TEST(JsonLogTest, ControlCharactersAndInvalidUtf8StayValidJson) {
  std::ostringstream out;
  auto logger = LoggerInto(&out, LogFormat::kJson);
  const std::string nasty = std::string("a\nb\"c\\d\te\x01\x1f") + std::string(1, '\0') + "f\xff\xc3(g\xe2\x82";
  {
    LogFields f;
    f.session = "\xfe\n";
    f.extra = {{"key\xc0", "value\x7f\xed\xa0\x80"}};
    ScopedLogContext ctx(f);
    logger->error("bad bytes: {}", nasty);
  }
  const auto lines = Lines(out.str());
  ASSERT_EQ(lines.size(), 1u) << "a newline in the message must be escaped, not end the line";
  boost::system::error_code ec;
  auto v = boost::json::parse(lines[0], ec);
  ASSERT_FALSE(ec) << lines[0];
  const std::string msg(v.at("msg").as_string());
  EXPECT_EQ(msg.rfind("bad bytes: a\nb\"c\\d\te\x01\x1f", 0), 0u) << "escaped, then decoded back";
  EXPECT_NE(msg.find("\xef\xbf\xbd"), std::string::npos) << "invalid bytes become U+FFFD";
  EXPECT_EQ(v.at("session").as_string(), "\xef\xbf\xbd\n");
  for (unsigned char c : lines[0]) EXPECT_GE(c, 0x20) << "raw control character in the line";
  EXPECT_EQ(v.as_object().size(), 7u) << lines[0];  // ts level component pid msg session + extra
}

TEST(TextLogTest, AppendsFieldsToSpdlogsDefaultLine) {
  std::ostringstream out;
  auto logger = LoggerInto(&out, LogFormat::kText);
  logger->info("no fields");
  {
    ScopedLogContext ctx(LogFields{.session = "s1", .seq = 3, .trace_id = "t1"});
    logger->info("with fields");
  }
  const auto lines = Lines(out.str());
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[0].find("[info] no fields"), std::string::npos) << lines[0];
  EXPECT_EQ(lines[0].find("session="), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("with fields session=s1 seq=3 trace_id=t1"), std::string::npos) << lines[1];
}

TEST(SetupLoggingTest, RefusesUnknownFormatsAndLevels) {
  EXPECT_EQ(ParseLogFormat("yaml").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(SetupLogging("x", "yaml", "info").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(SetupLogging("x", "json", "loud").code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(SetupLogging("x", "text", "info").ok());
  EXPECT_TRUE(SetupLogging("x", "json", "warn").ok());
  EXPECT_EQ(spdlog::get_level(), spdlog::level::warn);
  EXPECT_TRUE(SetupLogging("x", "text", "info").ok());
}

}  // namespace
}  // namespace sinew::logging
