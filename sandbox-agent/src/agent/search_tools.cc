// list_files (glob with `**`) and grep (POSIX extended regular expressions).
#include <fnmatch.h>

#include <algorithm>
#include <chrono>
#include <cstddef>

// Boost.Regex gives up on a search after BOOST_REGEX_MAX_STATE_COUNT states of its
// matcher when it searches through an iterator that is not random-access (for those it
// derives its own bound from the pattern and line, which grows with the pattern's length
// squared). It is read once per search, when the matcher is set up, so grep sets it for
// each line's search (GrepPattern::Search); nothing else in this file searches.
namespace sinew::sandbox {
namespace {
thread_local std::ptrdiff_t grep_line_state_limit = 1;
}  // namespace
}  // namespace sinew::sandbox
#define BOOST_REGEX_MAX_STATE_COUNT (::sinew::sandbox::grep_line_state_limit)
#include <boost/regex.hpp>

#include <iterator>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "agent/file_util.h"
#include "agent/output_limiter.h"
#include "agent/tool_input.h"
#include "agent/tools.h"

namespace sinew::sandbox {
namespace {

namespace fs = std::filesystem;

// Entries visited at most per call, so that a walk of a huge tree ends.
constexpr size_t kMaxWalkEntries = 200000;
constexpr size_t kMaxShownLineChars = 300;
// Longer grep patterns are refused: the search costs the pattern's size at every position.
constexpr size_t kMaxGrepPatternBytes = 4096;

std::vector<std::string> SplitPath(std::string_view s) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= s.size()) {
    size_t slash = s.find('/', start);
    if (slash == std::string_view::npos) slash = s.size();
    if (slash > start) parts.emplace_back(s.substr(start, slash - start));
    start = slash + 1;
  }
  return parts;
}

// Matches path segments against pattern segments; "**" matches zero or more segments.
bool MatchSegments(const std::vector<std::string>& pat, size_t pi,
                   const std::vector<std::string>& path, size_t si) {
  if (pi == pat.size()) return si == path.size();
  if (pat[pi] == "**") {
    for (size_t k = si; k <= path.size(); ++k) {
      if (MatchSegments(pat, pi + 1, path, k)) return true;
    }
    return false;
  }
  if (si == path.size()) return false;
  if (fnmatch(pat[pi].c_str(), path[si].c_str(), 0) != 0) return false;
  return MatchSegments(pat, pi + 1, path, si + 1);
}

// A pattern without '/' matches the file name at any depth (like `**/pattern`).
bool GlobMatches(const std::vector<std::string>& pat, bool anywhere, const std::string& rel) {
  auto parts = SplitPath(rel);
  if (anywhere) return !parts.empty() && fnmatch(pat[0].c_str(), parts.back().c_str(), 0) == 0;
  return MatchSegments(pat, 0, parts, 0);
}

Result<fs::path> BaseDir(const ToolConfig& config, const ToolInput& input) {
  SINEW_ASSIGN_OR_RETURN(auto raw, input.OptionalString("path"));
  fs::path base = config.workspace;
  if (raw) {
    SINEW_ASSIGN_OR_RETURN(base, ResolvePath(config, *raw, false));
  }
  std::error_code ec;
  if (!fs::exists(base, ec)) return Status::NotFound("path not found: " + base.string());
  return base;
}

// Walks `base` (a directory or one file), skipping .git, calling fn(path, rel) for each
// entry until it returns false. Returns false when the walk was cut at kMaxWalkEntries.
template <typename Fn>
bool Walk(const fs::path& base, Fn fn) {
  std::error_code ec;
  if (!fs::is_directory(base, ec)) {
    fn(base, base.filename().string());
    return true;
  }
  size_t visited = 0;
  fs::recursive_directory_iterator it(base, fs::directory_options::skip_permission_denied, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (++visited > kMaxWalkEntries) return false;
    const auto& entry = *it;
    // .git, and the kernel's pseudo file systems when walking from the root.
    if ((entry.path().filename() == ".git" || entry.path() == "/proc" || entry.path() == "/sys" ||
         entry.path() == "/dev") &&
        entry.is_directory(ec)) {
      it.disable_recursion_pending();
      continue;
    }
    if (!fn(entry.path(), entry.path().lexically_relative(base).string())) return true;
  }
  return true;
}

class ListFilesTool final : public Tool {
 public:
  explicit ListFilesTool(ToolConfig config) : Tool(kListFilesToolSpec), config_(std::move(config)) {}

  v1::ExecuteResult Run(const boost::json::object& json, const RunContext&) const override {
    auto input = ToolInput::Make(json, {"pattern", "path", "limit"});
    if (!input.ok()) return ErrorResult(input.status().message());
    auto pattern = input->RequiredString("pattern");
    if (!pattern.ok()) return ErrorResult(pattern.status().message());
    auto limit = input->OptionalInt("limit", 1, 100000);
    if (!limit.ok()) return ErrorResult(limit.status().message());
    auto base = BaseDir(config_, *input);
    if (!base.ok()) return ErrorResult(base.status().message());
    auto pat = SplitPath(*pattern);
    if (pat.empty())
      return ErrorResult("field 'pattern' is empty; use \"*\" or \"**\" to list everything");
    bool anywhere = pattern->find('/') == std::string::npos && *pattern != "**";
    std::vector<std::string> found;
    bool complete = Walk(*base, [&](const fs::path& p, const std::string& rel) {
      if (GlobMatches(pat, anywhere, rel)) {
        std::error_code ec;
        found.push_back(rel + (fs::is_directory(p, ec) ? "/" : ""));
      }
      return true;
    });
    std::sort(found.begin(), found.end());
    size_t cap = static_cast<size_t>(limit->value_or(1000));
    OutputLimiter out(config_.max_output_bytes);
    for (size_t k = 0; k < found.size() && k < cap; ++k) out.Append(found[k] + "\n");
    if (found.size() > cap) {
      out.Append("[... " + std::to_string(found.size() - cap) +
                 " more; narrow the pattern or raise limit]\n");
    }
    if (!complete)
      out.Append("[walk stopped after " + std::to_string(kMaxWalkEntries) + " entries]\n");
    if (found.empty()) return OkResult("no files match '" + *pattern + "' below " + base->string());
    return OkResult(out.Finish(), out.truncated() || found.size() > cap);
  }

 private:
  ToolConfig config_;
};

// The work one grep call may still do: a per-line allowance of matcher states and the
// call's deadline. Every state of Boost.Regex's backtracking matcher counts, the empty
// steps between reads of the line included (ambiguous nested groups take hundreds of
// those per character read).
class SearchBudget {
 public:
  SearchBudget(std::chrono::steady_clock::time_point deadline, uint64_t line_states)
      : deadline_(deadline), line_states_(line_states) {}

  // The states a search of a line of `bytes` bytes may visit: a fixed allowance plus a
  // few per byte, so that an ordinary pattern reads the longest line to its end.
  std::ptrdiff_t LineStates(size_t bytes) const {
    constexpr uint64_t kMax = static_cast<uint64_t>(PTRDIFF_MAX) / 2;
    uint64_t per_byte = kStatesPerByte * static_cast<uint64_t>(bytes);
    return static_cast<std::ptrdiff_t>(std::min(kMax, std::min(kMax, line_states_) + per_byte));
  }
  // One read of the line by the matcher; throws Exhausted once the deadline has passed
  // (read once every 2^16 reads).
  void Step() {
    if ((++reads_ & 0xffff) == 0 && std::chrono::steady_clock::now() >= deadline_) {
      deadline_passed_ = true;
      throw Exhausted{};
    }
  }
  bool deadline_passed() const { return deadline_passed_; }
  bool past_deadline() const { return std::chrono::steady_clock::now() >= deadline_; }

  // Unwinds the matcher (which releases its state on the way out, as on its own bound).
  struct Exhausted {};

 private:
  static constexpr uint64_t kStatesPerByte = 16;

  const std::chrono::steady_clock::time_point deadline_;
  const uint64_t line_states_;
  uint64_t reads_ = 0;
  bool deadline_passed_ = false;
};

// A position in a line that charges the budget for every character the matcher reads.
// Bidirectional, not random-access, so that Boost.Regex bounds a search by
// BOOST_REGEX_MAX_STATE_COUNT (grep's per-line allowance) and not by its own estimate.
class BudgetedChar {
 public:
  using iterator_category = std::bidirectional_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  BudgetedChar() = default;
  BudgetedChar(const char* p, SearchBudget* budget) : p_(p), budget_(budget) {}

  reference operator*() const {
    budget_->Step();
    return *p_;
  }
  BudgetedChar& operator++() {
    ++p_;
    return *this;
  }
  BudgetedChar operator++(int) {
    BudgetedChar before = *this;
    ++p_;
    return before;
  }
  BudgetedChar& operator--() {
    --p_;
    return *this;
  }
  BudgetedChar operator--(int) {
    BudgetedChar before = *this;
    --p_;
    return before;
  }
  friend bool operator==(const BudgetedChar& a, const BudgetedChar& b) { return a.p_ == b.p_; }

 private:
  const char* p_ = nullptr;
  SearchBudget* budget_ = nullptr;
};

// grep's pattern, compiled by Boost.Regex: a backtracking matcher, bounded in states per
// line and searched through BudgetedChar, so that no pattern and line can make a call
// run past its budget. glibc's
// regexec, used before, searched an unanchored pattern in time quadratic in the line
// (`a.*b.*z` on a 1 MB minified line: minutes), exponential with back-references, and
// regcomp expanded repetitions into gigabytes.
class GrepPattern {
 public:
  static Result<GrepPattern> Compile(const std::string& pattern, bool ignore_case) {
    if (pattern.size() > kMaxGrepPatternBytes) {
      return Status::InvalidArgument("field 'pattern' is " + std::to_string(pattern.size()) +
                                     " bytes; at most " + std::to_string(kMaxGrepPatternBytes));
    }
    if (pattern.find('\0') != std::string::npos)
      return Status::InvalidArgument("field 'pattern' contains a NUL byte");
    try {
      auto flags = boost::regex::extended | boost::regex::nosubs;
      if (ignore_case) flags |= boost::regex::icase;
      return GrepPattern(boost::regex(pattern, flags));
    } catch (const boost::regex_error& e) {
      return Status::InvalidArgument(
          "invalid regular expression '" + pattern + "': " + e.what() +
          " (POSIX extended syntax without back-references: escape ( ) { } + ? | with \\ to "
          "match them literally)");
    }
  }

  // True when `line` holds a match. ResourceExhausted when deciding it took more states of
  // the matcher than the line's allowance in `budget`; DeadlineExceeded when the budget's
  // deadline passed first.
  Result<bool> Search(const std::string& line, SearchBudget& budget) const {
    grep_line_state_limit = budget.LineStates(line.size());
    const BudgetedChar begin(line.data(), &budget);
    const BudgetedChar end(line.data() + line.size(), &budget);
    try {
      return boost::regex_search(begin, end, re_, boost::match_any | boost::match_not_dot_newline);
    } catch (const SearchBudget::Exhausted&) {
      return Status::DeadlineExceeded("the call's time budget ran out inside a line");
    } catch (const std::runtime_error& e) {
      return Status::ResourceExhausted(e.what());
    }
  }

 private:
  explicit GrepPattern(boost::regex re) : re_(std::move(re)) {}
  boost::regex re_;
};

// Lines skipped at the work bound after which a call stops: a pattern that needs more
// than the bound on this many lines is too ambiguous for the rest of them too, and the
// caller learns that at once instead of when the time budget runs out.
constexpr size_t kMaxTooComplexLines = 16;

// One grep call's search through files, stopping at the match limit, the time budget,
// kMaxTooComplexLines skipped lines or the caller's cancellation; it collects the
// matching lines and what it could not search.
class GrepScan {
 public:
  GrepScan(const GrepPattern& pattern, size_t limit, const ToolConfig& config, const RunContext& ctx)
      : pattern_(pattern),
        limit_(limit),
        budget_(config.grep_time_budget),
        search_budget_(std::chrono::steady_clock::now() + config.grep_time_budget,
                       config.grep_line_states),
        ctx_(ctx),
        out_(config.max_output_bytes) {}

  // Searches one file's text, shown as `shown_name`. False once the search must stop.
  bool File(const std::string& content, const std::string& shown_name) {
    ++files_;
    std::istringstream in(content);
    std::string line;
    size_t line_no = 0;
    while (std::getline(in, line)) {
      ++line_no;
      if (!Line(line, shown_name, line_no)) return false;
    }
    return true;
  }

  size_t matches() const { return matches_; }

  // The matches and notes on anything left unsearched; `truncated` when any was cut.
  v1::ExecuteResult Finish(const std::string& pattern, const fs::path& base) {
    if (over_limit_)
      out_.Append("[... more matches; stopped at limit " + std::to_string(limit_) + "]\n");
    if (too_complex_ > 0) {
      out_.Append("[" + std::to_string(too_complex_) +
                  " line(s) not searched: matching the pattern there exceeded the regular "
                  "expression engine's work bound, first at " + first_too_complex_ +
                  "; make the pattern less ambiguous, e.g. fewer .* ]\n");
    }
    if (too_complex_ >= kMaxTooComplexLines) {
      out_.Append("[stopped after " + std::to_string(too_complex_) +
                  " lines exceeded that bound, " + std::to_string(files_) +
                  " file(s) searched; the pattern is too ambiguous to search the rest: fewer "
                  "nested groups, alternatives that overlap, or .* ]\n");
    }
    if (out_of_time_) {
      out_.Append("[stopped after " + std::to_string(budget_.count()) + " ms, " +
                  std::to_string(files_) + " file(s) searched; narrow `path` or `glob`]\n");
    }
    if (cancelled_) out_.Append("[stopped: the call was cancelled]\n");
    bool cut = over_limit_ || too_complex_ > 0 || out_of_time_ || cancelled_;
    if (matches_ == 0 && !cut) return OkResult("no matches for '" + pattern + "' below " + base.string());
    return OkResult(out_.Finish(), out_.truncated() || cut);
  }

 private:
  bool Line(std::string& line, const std::string& shown_name, size_t line_no) {
    if (search_budget_.past_deadline()) {
      out_of_time_ = true;
      return false;
    }
    if (ctx_.cancelled && ctx_.cancelled()) {
      cancelled_ = true;
      return false;
    }
    Result<bool> hit = pattern_.Search(line, search_budget_);
    if (!hit.ok() && hit.status().code() == StatusCode::kDeadlineExceeded) {
      out_of_time_ = true;
      return false;
    }
    if (!hit.ok()) {
      if (too_complex_++ == 0) first_too_complex_ = shown_name + ":" + std::to_string(line_no);
      return too_complex_ < kMaxTooComplexLines;
    }
    if (!*hit) return true;
    if (++matches_ > limit_) {
      over_limit_ = true;
      matches_ = limit_;
      return false;
    }
    if (line.size() > kMaxShownLineChars) line = line.substr(0, kMaxShownLineChars) + " [line cut]";
    out_.Append(shown_name + ":" + std::to_string(line_no) + ": " + line + "\n");
    return true;
  }

  const GrepPattern& pattern_;
  const size_t limit_;
  const std::chrono::milliseconds budget_;
  SearchBudget search_budget_;
  const RunContext& ctx_;
  OutputLimiter out_;
  size_t files_ = 0;
  size_t matches_ = 0;
  size_t too_complex_ = 0;
  std::string first_too_complex_;
  bool over_limit_ = false;
  bool out_of_time_ = false;
  bool cancelled_ = false;
};

class GrepTool final : public Tool {
 public:
  explicit GrepTool(ToolConfig config) : Tool(kGrepToolSpec), config_(std::move(config)) {}

  v1::ExecuteResult Run(const boost::json::object& json, const RunContext& ctx) const override {
    auto input = ToolInput::Make(json, {"pattern", "path", "glob", "ignore_case", "limit"});
    if (!input.ok()) return ErrorResult(input.status().message());
    auto pattern = input->RequiredString("pattern");
    if (!pattern.ok()) return ErrorResult(pattern.status().message());
    auto glob = input->OptionalString("glob");
    if (!glob.ok()) return ErrorResult(glob.status().message());
    auto icase = input->OptionalBool("ignore_case");
    if (!icase.ok()) return ErrorResult(icase.status().message());
    auto limit = input->OptionalInt("limit", 1, 100000);
    if (!limit.ok()) return ErrorResult(limit.status().message());
    auto base = BaseDir(config_, *input);
    if (!base.ok()) return ErrorResult(base.status().message());
    auto compiled = GrepPattern::Compile(*pattern, icase->value_or(false));
    if (!compiled.ok()) return ErrorResult(compiled.status().message());
    std::vector<std::string> glob_pat;
    bool anywhere = false;
    if (glob->has_value()) {
      glob_pat = SplitPath(**glob);
      anywhere = (*glob)->find('/') == std::string::npos;
    }
    GrepScan scan(*compiled, static_cast<size_t>(limit->value_or(200)), config_, ctx);
    bool single_file = !fs::is_directory(*base);
    Walk(*base, [&](const fs::path& p, const std::string& rel) {
      std::error_code ec;
      if (!fs::is_regular_file(p, ec)) return true;
      if (!glob_pat.empty() && !GlobMatches(glob_pat, anywhere, rel)) return true;
      auto content = ReadWholeFile(p);
      if (!content.ok() || LooksBinary(*content)) return true;
      return scan.File(*content, single_file ? p.string() : rel);
    });
    return scan.Finish(*pattern, *base);
  }

 private:
  ToolConfig config_;
};

}  // namespace

std::unique_ptr<Tool> MakeListFilesTool(const ToolConfig& c) {
  return std::make_unique<ListFilesTool>(c);
}
std::unique_ptr<Tool> MakeGrepTool(const ToolConfig& c) { return std::make_unique<GrepTool>(c); }

}  // namespace sinew::sandbox
