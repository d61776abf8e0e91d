#include "sinew/eval/resource_config.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <regex>
#include <sstream>

namespace sinew::eval {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr uint64_t kUncappedCeiling = 16ull << 30;

const char* kForms =
    "accepted: a preset (1x, 2x, g1x-c3x, uncapped) or NAME=guarantee=SIZE,ceiling=SIZE,"
    "cpus=N,pids=N where SIZE is 512m, 2g, bytes, or a multiple of the task's figure like 2x";

Result<double> ParseNumber(const std::string& text) {
  if (text.empty()) return Status::InvalidArgument("empty number");
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (...) {
    return Status::InvalidArgument("'" + text + "' is not a number");
  }
  if (used != text.size() || !std::isfinite(v) || v <= 0) {
    return Status::InvalidArgument("'" + text + "' is not a positive number");
  }
  return v;
}

Result<Amount> ParseCpus(const std::string& text) {
  Amount a;
  if (!text.empty() && (text.back() == 'x' || text.back() == 'X')) {
    SINEW_ASSIGN_OR_RETURN(a.value, ParseNumber(text.substr(0, text.size() - 1)));
    return a;
  }
  a.multiple = false;
  SINEW_ASSIGN_OR_RETURN(a.value, ParseNumber(text));
  return a;
}

// A preset name: Nx, gAx-cBx, uncapped.
bool ParsePreset(const std::string& name, ResourceConfig* c) {
  static const std::regex kBoth(R"(([0-9]+(\.[0-9]+)?)x)");
  static const std::regex kSplit(R"(g([0-9]+(\.[0-9]+)?)x-c([0-9]+(\.[0-9]+)?)x)");
  std::smatch m;
  if (name == "uncapped") {
    c->guarantee = {1, true};
    c->ceiling = {static_cast<double>(kUncappedCeiling), false};
    c->cpus = {static_cast<double>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN))), false};
    return true;
  }
  if (std::regex_match(name, m, kBoth)) {
    double v = std::stod(m[1].str());
    if (v <= 0) return false;
    c->guarantee = c->ceiling = c->cpus = {v, true};
    return true;
  }
  if (std::regex_match(name, m, kSplit)) {
    double g = std::stod(m[1].str()), ceil = std::stod(m[3].str());
    if (g <= 0 || ceil <= 0 || g > ceil) return false;
    c->guarantee = {g, true};
    c->ceiling = c->cpus = {ceil, true};
    return true;
  }
  return false;
}

}  // namespace

Result<Amount> ParseSize(const std::string& text) {
  if (text.empty()) return Status::InvalidArgument("empty size");
  char last = static_cast<char>(std::tolower(static_cast<unsigned char>(text.back())));
  std::string digits = text.substr(0, text.size() - 1);
  Amount a;
  a.multiple = false;
  switch (last) {
    case 'x': {
      a.multiple = true;
      SINEW_ASSIGN_OR_RETURN(a.value, ParseNumber(digits));
      return a;
    }
    case 'k': {
      SINEW_ASSIGN_OR_RETURN(a.value, ParseNumber(digits));
      a.value *= 1024;
      break;
    }
    case 'm': {
      SINEW_ASSIGN_OR_RETURN(a.value, ParseNumber(digits));
      a.value *= kMiB;
      break;
    }
    case 'g': {
      SINEW_ASSIGN_OR_RETURN(a.value, ParseNumber(digits));
      a.value *= kMiB * 1024;
      break;
    }
    default: {
      SINEW_ASSIGN_OR_RETURN(a.value, ParseNumber(text));
      break;
    }
  }
  a.value = std::floor(a.value);
  return a;
}

Result<ResourceConfig> ParseResourceConfig(const std::string& arg) {
  ResourceConfig c;
  c.spec = arg;
  size_t eq = arg.find('=');
  if (eq == std::string::npos) {
    c.name = arg;
    if (!ParsePreset(arg, &c)) {
      return Status::InvalidArgument("--config " + arg + ": unknown preset; " + kForms);
    }
    return c;
  }
  c.name = arg.substr(0, eq);
  static const std::regex kName("[A-Za-z0-9][A-Za-z0-9._-]{0,63}");
  if (!std::regex_match(c.name, kName)) {
    return Status::InvalidArgument("--config " + arg + ": the name '" + c.name +
                                   "' must be letters, digits, '.', '_' or '-'");
  }
  std::string rest = arg.substr(eq + 1);
  if (rest.empty()) return Status::InvalidArgument("--config " + arg + ": empty spec; " + kForms);
  // NAME=PRESET names a preset.
  if (rest.find('=') == std::string::npos) {
    if (!ParsePreset(rest, &c)) {
      return Status::InvalidArgument("--config " + arg + ": unknown preset " + rest + "; " +
                                     kForms);
    }
    return c;
  }
  bool has_guarantee = false, has_ceiling = false;
  std::stringstream ss(rest);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t e = item.find('=');
    if (e == std::string::npos) {
      return Status::InvalidArgument("--config " + arg + ": '" + item + "' is not KEY=VALUE; " +
                                     kForms);
    }
    std::string key = item.substr(0, e), value = item.substr(e + 1);
    Status err = Status::Ok();
    auto set = [&](Result<Amount> parsed, Amount* dst, bool* seen) {
      if (!parsed.ok()) {
        err = parsed.status();
        return;
      }
      *dst = *parsed;
      if (seen) *seen = true;
    };
    if (key == "guarantee") {
      set(ParseSize(value), &c.guarantee, &has_guarantee);
    } else if (key == "ceiling") {
      set(ParseSize(value), &c.ceiling, &has_ceiling);
    } else if (key == "cpus") {
      set(ParseCpus(value), &c.cpus, nullptr);
    } else if (key == "pids") {
      auto n = ParseNumber(value);
      if (!n.ok() || *n < 32 || *n > 65536 || std::floor(*n) != *n) {
        return Status::InvalidArgument("--config " + arg +
                                       ": pids must be an integer in [32, 65536]");
      }
      c.pids = static_cast<uint32_t>(*n);
    } else {
      return Status::InvalidArgument("--config " + arg + ": unknown key '" + key + "'; " + kForms);
    }
    if (!err.ok())
      return Status::InvalidArgument("--config " + arg + ": " + key + ": " + err.message());
  }
  if (has_guarantee && !has_ceiling) c.ceiling = c.guarantee;
  if (has_ceiling && !has_guarantee) c.guarantee = c.ceiling;
  if (!c.guarantee.multiple && !c.ceiling.multiple && c.guarantee.value > c.ceiling.value) {
    return Status::InvalidArgument("--config " + arg + ": the guarantee exceeds the ceiling");
  }
  return c;
}

SandboxShape ResolveShape(const ResourceConfig& config, const Task& task) {
  auto bytes = [&](const Amount& a) {
    double v = a.multiple ? a.value * static_cast<double>(task.memory_mb) * kMiB : a.value;
    return std::max<uint64_t>(16ull << 20, static_cast<uint64_t>(v));
  };
  SandboxShape s;
  s.memory_limit_bytes = bytes(config.ceiling);
  s.memory_guaranteed_bytes = std::min(bytes(config.guarantee), s.memory_limit_bytes);
  double cpus = config.cpus.multiple ? config.cpus.value * task.cpus : config.cpus.value;
  s.cpu_millicores = static_cast<uint32_t>(std::clamp(cpus * 1000.0, 10.0, 256000.0));
  s.pids_limit = config.pids;
  s.workspace_bytes = task.storage_mb << 20;
  s.image = task.image;
  return s;
}

}  // namespace sinew::eval
