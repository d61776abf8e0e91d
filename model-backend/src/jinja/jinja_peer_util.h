// Test helper: renders cases with Python's jinja2 (jinja_peer.py, configured as
// transformers) in one subprocess, so tests compare our output with the reference.
#pragma once

#include <unistd.h>

#include <boost/json.hpp>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace sinew::jinja_test {

struct PeerCase {
  std::string source;
  boost::json::object context;
  int64_t now = 1700000000;  // strftime_now's time (unix seconds) on both sides
};

struct PeerResult {
  bool ok = false;
  std::string text;  // the rendering, or Python's error
};

// Runs all cases through Python; fails (returns an empty vector) when Python can't run.
inline std::vector<PeerResult> RenderWithPython(const std::vector<PeerCase>& cases) {
  boost::json::array items;
  for (const PeerCase& c : cases) {
    items.push_back(boost::json::object{{"template", c.source}, {"context", c.context}, {"now", c.now}});
  }
  const std::string in_path = "/tmp/sinew_jinja_peer_" + std::to_string(getpid()) + ".json";
  {
    std::ofstream in(in_path);
    in << boost::json::serialize(boost::json::object{{"cases", std::move(items)}});
  }
  const std::string command = std::string(SINEW_PYTHON3) + " " + SINEW_JINJA_PEER + " < " + in_path;
  FILE* pipe = popen(command.c_str(), "r");
  std::string output;
  if (pipe != nullptr) {
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) output.append(buf, n);
    pclose(pipe);
  }
  std::remove(in_path.c_str());
  std::vector<PeerResult> results;
  boost::system::error_code ec;
  boost::json::value parsed = boost::json::parse(output, ec);
  if (ec || !parsed.is_array()) return results;
  for (const auto& r : parsed.as_array()) {
    const auto& o = r.as_object();
    PeerResult result;
    result.ok = o.at("ok").as_bool();
    result.text = std::string(result.ok ? o.at("text").as_string() : o.at("error").as_string());
    results.push_back(std::move(result));
  }
  return results;
}

}  // namespace sinew::jinja_test
