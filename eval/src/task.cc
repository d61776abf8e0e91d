#include "sinew/eval/task.h"

#include <fnmatch.h>

#include <cpptoml.h>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace sinew::eval {
namespace fs = std::filesystem;

namespace {

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Reads a number (integer or float) at `key` of `table`; leaves `*out` when absent.
Status ReadNumber(const cpptoml::table& table, const std::string& key, const std::string& where,
                  double* out) {
  if (!table.contains(key)) return Status::Ok();
  if (auto i = table.get_as<int64_t>(key)) {
    *out = static_cast<double>(*i);
  } else if (auto d = table.get_as<double>(key)) {
    *out = *d;
  } else {
    return Status::InvalidArgument(where + ": " + key + " must be a number");
  }
  if (*out < 0) return Status::InvalidArgument(where + ": " + key + " must not be negative");
  return Status::Ok();
}

Status ReadString(const cpptoml::table& table, const std::string& key, const std::string& where,
                  std::string* out) {
  if (!table.contains(key)) return Status::Ok();
  auto s = table.get_as<std::string>(key);
  if (!s) return Status::InvalidArgument(where + ": " + key + " must be a string");
  *out = *s;
  return Status::Ok();
}

void WarnUnknown(const cpptoml::table& table, const std::string& section,
                 const std::set<std::string>& known, const std::string& where,
                 std::vector<std::string>* warnings) {
  for (const auto& [key, value] : table) {
    if (!known.count(key) && warnings) {
      warnings->push_back(where + ": unknown key " +
                          (section.empty() ? key : "[" + section + "] " + key));
    }
  }
}

}  // namespace

std::vector<std::string> ListFiles(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (it->is_regular_file(ec)) out.push_back(fs::relative(it->path(), dir, ec).string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

Result<Task> LoadTask(const std::string& dir_arg, std::vector<std::string>* warnings) {
  std::error_code ec;
  fs::path dir = fs::absolute(dir_arg, ec);
  if (!fs::is_directory(dir, ec)) return Status::NotFound(dir_arg + " is not a directory");
  Task t;
  t.dir = dir.string();
  t.name = dir.filename().string();
  for (const char* required :
       {"instruction.md", "task.toml", "solution/solve.sh", "tests/test.sh"}) {
    if (!fs::is_regular_file(dir / required, ec)) {
      return Status::InvalidArgument("task " + t.name + ": missing required file " +
                                     (dir / required).string());
    }
  }
  t.instruction = ReadAll(dir / "instruction.md");
  if (t.instruction.find_first_not_of(" \t\r\n") == std::string::npos) {
    return Status::InvalidArgument("task " + t.name + ": instruction.md is empty");
  }
  t.has_setup = fs::is_regular_file(dir / "environment" / "setup.sh", ec);

  const std::string where = (dir / "task.toml").string();
  std::shared_ptr<cpptoml::table> root;
  try {
    root = cpptoml::parse_file(where);
  } catch (const cpptoml::parse_exception& e) {
    return Status::InvalidArgument(where + ": " + e.what());
  }
  WarnUnknown(*root, "", {"version", "metadata", "agent", "verifier", "environment", "solution"},
              where, warnings);
  if (auto md = root->get_table("metadata")) {
    SINEW_RETURN_IF_ERROR(ReadString(*md, "name", where, &t.name));
    SINEW_RETURN_IF_ERROR(ReadString(*md, "difficulty", where, &t.difficulty));
    if (md->contains("tags")) {
      auto tags = md->get_array_of<std::string>("tags");
      if (!tags) return Status::InvalidArgument(where + ": tags must be an array of strings");
      t.tags = *tags;
    }
    WarnUnknown(*md, "metadata",
                {"name", "difficulty", "tags", "category", "author_name", "author_email",
                 "expert_time_estimate_min", "junior_time_estimate_min"},
                where, warnings);
  }
  if (auto agent = root->get_table("agent")) {
    SINEW_RETURN_IF_ERROR(ReadNumber(*agent, "timeout_sec", where, &t.agent_timeout_sec));
    WarnUnknown(*agent, "agent", {"timeout_sec"}, where, warnings);
  }
  if (auto verifier = root->get_table("verifier")) {
    SINEW_RETURN_IF_ERROR(ReadNumber(*verifier, "timeout_sec", where, &t.verifier_timeout_sec));
    WarnUnknown(*verifier, "verifier", {"timeout_sec"}, where, warnings);
  }
  if (auto env = root->get_table("environment")) {
    SINEW_RETURN_IF_ERROR(ReadNumber(*env, "cpus", where, &t.cpus));
    double memory = static_cast<double>(t.memory_mb), storage = static_cast<double>(t.storage_mb);
    SINEW_RETURN_IF_ERROR(ReadNumber(*env, "memory_mb", where, &memory));
    SINEW_RETURN_IF_ERROR(ReadNumber(*env, "storage_mb", where, &storage));
    t.memory_mb = static_cast<uint64_t>(memory);
    t.storage_mb = static_cast<uint64_t>(storage);
    SINEW_RETURN_IF_ERROR(ReadString(*env, "image", where, &t.image));
    if (env->contains("allow_internet")) {
      auto allow = env->get_as<bool>("allow_internet");
      if (!allow) return Status::InvalidArgument(where + ": allow_internet must be true or false");
      if (*allow) {
        return Status::InvalidArgument(
            where +
            ": allow_internet = true is not supported (sandboxes have no network); set "
            "it to false");
      }
    }
    WarnUnknown(*env, "environment",
                {"cpus", "memory_mb", "storage_mb", "image", "allow_internet", "build_timeout_sec",
                 "docker_image"},
                where, warnings);
  }
  if (t.agent_timeout_sec <= 0 || t.verifier_timeout_sec <= 0) {
    return Status::InvalidArgument(where + ": timeouts must be positive");
  }
  if (t.cpus <= 0) return Status::InvalidArgument(where + ": [environment] cpus must be positive");
  if (t.memory_mb < 16)
    return Status::InvalidArgument(where + ": [environment] memory_mb must be >= 16");
  if (t.storage_mb < 1)
    return Status::InvalidArgument(where + ": [environment] storage_mb must be >= 1");
  return t;
}

Result<std::vector<Task>> LoadSuite(const std::string& suite_dir, const std::string& glob,
                                    std::vector<std::string>* warnings) {
  std::error_code ec;
  if (!fs::is_directory(suite_dir, ec)) return Status::NotFound(suite_dir + " is not a directory");
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(suite_dir, ec)) {
    if (!e.is_directory(ec)) continue;
    std::string name = e.path().filename().string();
    if (name.empty() || name[0] == '.') continue;
    if (!glob.empty() && glob != "*" && fnmatch(glob.c_str(), name.c_str(), 0) != 0) continue;
    dirs.push_back(e.path());
  }
  std::sort(dirs.begin(), dirs.end());
  std::vector<Task> tasks;
  std::set<std::string> names;
  for (const auto& d : dirs) {
    SINEW_ASSIGN_OR_RETURN(Task t, LoadTask(d.string(), warnings));
    if (!names.insert(t.name).second) {
      return Status::InvalidArgument("two tasks are named " + t.name + " (" + d.string() + ")");
    }
    tasks.push_back(std::move(t));
  }
  if (tasks.empty()) {
    return Status::NotFound("no task folders in " + suite_dir +
                            (glob.empty() ? std::string() : " match " + glob));
  }
  return tasks;
}

}  // namespace sinew::eval
