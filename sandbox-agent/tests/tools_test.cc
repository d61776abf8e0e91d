// In-process tests of the agent's tools: each tool, its limits and its error paths.
// Runs on the host in a temporary workspace (the container adds confinement, not logic).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "agent/output_limiter.h"
#include "agent/beneath.h"
#include "agent/tools.h"

namespace sinew::sandbox {
namespace {

namespace fs = std::filesystem;

class ToolsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sinew-tools-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    config_.workspace = root_ / "ws";
    fs::create_directories(config_.workspace);
    config_.max_output_bytes = 1000;
    registry_ = std::make_unique<ToolRegistry>(config_);
  }
  void TearDown() override { fs::remove_all(root_); }
  v1::ExecuteResult Run(std::string_view tool, std::string_view json) {
    return registry_->Execute(tool, json);
  }
  void WriteFile(const fs::path& rel, const std::string& content) {
    fs::create_directories((config_.workspace / rel).parent_path());
    std::ofstream(config_.workspace / rel) << content;
  }
  std::string ReadFile(const fs::path& rel) {
    std::ifstream in(config_.workspace / rel);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  fs::path root_;
  ToolConfig config_;
  std::unique_ptr<ToolRegistry> registry_;
};

TEST_F(ToolsTest, ListsSixToolsWithSchemasAndIdempotence) {
  auto specs = registry_->Specs();
  ASSERT_EQ(specs.size(), 6u);
  std::map<std::string, bool> idem;
  for (const auto& s : specs) {
    idem[s.name()] = s.idempotent();
    EXPECT_FALSE(s.description().empty());
    boost::system::error_code ec;
    auto schema = boost::json::parse(s.input_schema_json(), ec);
    EXPECT_FALSE(ec) << s.name();
    EXPECT_TRUE(schema.is_object());
    EXPECT_NE(s.description().find("dempotent"), std::string::npos) << s.name();
  }
  EXPECT_FALSE(idem.at("bash"));
  EXPECT_TRUE(idem.at("read_file"));
  EXPECT_TRUE(idem.at("write_file"));
  EXPECT_FALSE(idem.at("edit_file"));
  EXPECT_TRUE(idem.at("list_files"));
  EXPECT_TRUE(idem.at("grep"));
}

TEST_F(ToolsTest, ListsExactlyTheSharedToolSpecsTheHarnessOffersModels) {
  auto specs = registry_->Specs();
  ASSERT_EQ(specs.size(), kSandboxToolSpecs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    EXPECT_EQ(specs[i].name(), kSandboxToolSpecs[i].name);
    EXPECT_EQ(specs[i].description(), kSandboxToolSpecs[i].description) << specs[i].name();
    EXPECT_EQ(specs[i].input_schema_json(), kSandboxToolSpecs[i].input_schema_json) << specs[i].name();
    EXPECT_EQ(specs[i].idempotent(), kSandboxToolSpecs[i].idempotent) << specs[i].name();
  }
}

TEST_F(ToolsTest, BashRunsInWorkspaceAndReportsExitCode) {
  auto r = Run("bash", R"({"command":"pwd; echo err >&2; exit 3"})");
  EXPECT_TRUE(r.is_error());
  EXPECT_EQ(r.exit_code(), 3);
  EXPECT_NE(r.output().find(config_.workspace.string()), std::string::npos) << r.output();
  EXPECT_NE(r.output().find("err"), std::string::npos);
  EXPECT_NE(r.output().find("[exit code 3]"), std::string::npos);
  auto ok = Run("bash", R"({"command":"echo hi","cwd":"."})");
  EXPECT_FALSE(ok.is_error());
  EXPECT_EQ(ok.output(), "hi\n");
}

TEST_F(ToolsTest, BashTimeoutKillsTheWholeProcessGroup) {
  auto r = Run("bash", R"({"command":"sleep 31.7 & sleep 31.7; echo never","timeout":1})");
  EXPECT_TRUE(r.is_error());
  EXPECT_TRUE(r.timed_out());
  EXPECT_EQ(r.signal(), SIGKILL);
  EXPECT_NE(r.output().find("timed out after 1 s"), std::string::npos) << r.output();
  EXPECT_LT(r.duration_ms(), 10000);
  // The background sleep was in the group and is gone too.
  auto ps = Run("bash", R"({"command":"pgrep -f 'sleep 3[1].7' || echo none"})");
  EXPECT_NE(ps.output().find("none"), std::string::npos) << ps.output();
}

TEST_F(ToolsTest, BashReportsSignals) {
  auto r = Run("bash", R"({"command":"kill -TERM $$"})");
  EXPECT_TRUE(r.is_error());
  EXPECT_EQ(r.signal(), SIGTERM);
  EXPECT_EQ(r.exit_code(), -1);
}

TEST_F(ToolsTest, BashOutputIsCappedKeepingHeadAndTail) {
  auto r = Run("bash", R"({"command":"echo HEAD; seq 1 100000; echo TAIL"})");
  EXPECT_TRUE(r.truncated());
  EXPECT_EQ(r.output().rfind("HEAD", 0), 0u);
  EXPECT_NE(r.output().find("TAIL"), std::string::npos);
  EXPECT_NE(r.output().find("bytes truncated"), std::string::npos);
  EXPECT_LT(r.output().size(), 1200u);
}

TEST_F(ToolsTest, BashStreamsChunks) {
  std::string streamed;
  RunContext ctx;
  // The command writes its second chunk only once the first has reached the caller.
  ctx.sink = [&](bool is_stderr, std::string_view b) {
    streamed += (is_stderr ? "E:" : "O:") + std::string(b);
    WriteFile("seen", streamed);
  };
  auto r = registry_->Execute(
      "bash", R"({"command":"echo one; until [ -e seen ]; do sleep 0.01; done; echo two >&2"})", ctx);
  EXPECT_FALSE(r.is_error());
  EXPECT_EQ(streamed, "O:one\nE:two\n");
}

TEST_F(ToolsTest, BashStopsWhenTheCallerCancels) {
  RunContext ctx;
  bool saw_output = false;
  ctx.sink = [&](bool, std::string_view) { saw_output = true; };
  ctx.cancelled = [&] { return saw_output; };  // the caller gives up once output arrived
  auto r = registry_->Execute("bash", R"({"command":"echo started; sleep 30"})", ctx);
  EXPECT_TRUE(r.is_error());
  EXPECT_FALSE(r.timed_out());
  EXPECT_EQ(r.signal(), SIGKILL);
  EXPECT_NE(r.output().find("cancelled by the caller"), std::string::npos) << r.output();
  EXPECT_LT(r.duration_ms(), 20000);
}

TEST_F(ToolsTest, BashInvalidUtf8IsReplaced) {
  auto r = Run("bash", R"({"command":"printf 'a\\xffb'"})");
  EXPECT_EQ(r.output(),
            "a\xEF\xBF\xBD"
            "b");
}

TEST_F(ToolsTest, BashInputErrors) {
  EXPECT_NE(Run("bash", "{}").output().find("command is required"), std::string::npos);
  EXPECT_NE(Run("bash", R"({"command":1})").output().find("command must be a string"),
            std::string::npos);
  EXPECT_NE(Run("bash", R"({"command":"x","timeout":"5"})").output().find("must be an integer"),
            std::string::npos);
  EXPECT_NE(Run("bash", R"({"command":"x","timeout":0})").output().find("between 1 and"),
            std::string::npos);
  EXPECT_NE(
      Run("bash", R"({"command":"x","cwd":"nope"})").output().find("not an existing directory"),
      std::string::npos);
  EXPECT_NE(Run("bash", R"({"command":"x","colour":1})").output().find("unknown field 'colour'"),
            std::string::npos);
  EXPECT_NE(Run("bash", "{not json").output().find("not valid JSON"), std::string::npos);
  EXPECT_NE(Run("bash", "[1,2]").output().find("must be a JSON object"), std::string::npos);
  EXPECT_NE(Run("nosuch", "{}").output().find("unknown tool 'nosuch'; available tools: bash"),
            std::string::npos);
  EXPECT_TRUE(Run("nosuch", "{}").is_error());
}

// Integers written as numbers past the int64 range (found by sandbox_tools_fuzz: 2.2e20 was
// converted to int64, which is undefined) are refused with the range, like large integers.
TEST_F(ToolsTest, IntegerFieldsPastTheInt64RangeAreRefusedWithTheRange) {
  WriteFile("a.txt", "one\ntwo\n");
  for (const char* offset : {"218446744073709551616", "2.2e20", "-1e300", "1e19", "18446744073709551615"}) {
    auto r = Run("read_file", std::string(R"({"path":"a.txt","offset":)") + offset + "}");
    EXPECT_TRUE(r.is_error()) << offset;
    EXPECT_NE(r.output().find("offset must be between 1 and"), std::string::npos) << r.output();
  }
  auto whole = Run("read_file", R"({"path":"a.txt","offset":2.0,"limit":1e0})");
  EXPECT_FALSE(whole.is_error()) << whole.output();
  EXPECT_EQ(whole.output(), "     2\ttwo\n");
  EXPECT_NE(Run("read_file", R"({"path":"a.txt","offset":1.5})").output().find("must be an integer"),
            std::string::npos);
}

TEST_F(ToolsTest, ReadFileNumbersLinesWithOffsetAndLimit) {
  WriteFile("a.txt", "one\ntwo\nthree\nfour\n");
  auto r = Run("read_file", R"({"path":"a.txt","offset":2,"limit":2})");
  EXPECT_FALSE(r.is_error()) << r.output();
  EXPECT_EQ(r.output(),
            "     2\ttwo\n     3\tthree\n[... more lines follow; read on with offset 4]\n");
  EXPECT_NE(Run("read_file", R"({"path":"a.txt","offset":9})").output().find("past the end"),
            std::string::npos);
  EXPECT_NE(Run("read_file", R"({"path":"missing"})").output().find("file not found"),
            std::string::npos);
  EXPECT_NE(Run("read_file", R"({"path":"."})").output().find("is a directory"), std::string::npos);
  WriteFile("bin", std::string("a\0b", 3));
  EXPECT_NE(Run("read_file", R"({"path":"bin"})").output().find("looks binary"), std::string::npos);
  EXPECT_EQ(Run("read_file", R"({"path":"a.txt","limit":-1})").is_error(), true);
}

TEST_F(ToolsTest, WriteFileCreatesDirsAndStaysInWorkspace) {
  auto r = Run("write_file", R"({"path":"d/e/f.txt","content":"hello"})");
  EXPECT_FALSE(r.is_error()) << r.output();
  EXPECT_EQ(ReadFile("d/e/f.txt"), "hello");
  auto out = Run("write_file", R"({"path":"../escape.txt","content":"x"})");
  EXPECT_TRUE(out.is_error());
  EXPECT_NE(out.output().find("outside the workspace"), std::string::npos);
  EXPECT_FALSE(fs::exists(root_ / "escape.txt"));
  EXPECT_TRUE(Run("write_file", R"({"path":"/etc/passwd-x","content":"x"})").is_error());
  // A symbolic link that points out of the workspace does not let a write through.
  fs::create_directory_symlink(root_, config_.workspace / "link");
  auto via_link = Run("write_file", R"({"path":"link/escape.txt","content":"x"})");
  EXPECT_TRUE(via_link.is_error());
  EXPECT_FALSE(fs::exists(root_ / "escape.txt"));
  EXPECT_NE(Run("write_file", R"({"path":"x"})").output().find("content is required"),
            std::string::npos);
}

TEST_F(ToolsTest, EditFileReplacesExactlyOnceOrAll) {
  WriteFile("c.py", "a = 1\nb = 1\n");
  auto amb = Run("edit_file", R"({"path":"c.py","old_string":" = 1","new_string":" = 2"})");
  EXPECT_TRUE(amb.is_error());
  EXPECT_NE(amb.output().find("occurs 2 times"), std::string::npos);
  EXPECT_EQ(ReadFile("c.py"), "a = 1\nb = 1\n");
  auto one = Run("edit_file", R"({"path":"c.py","old_string":"a = 1","new_string":"a = 5"})");
  EXPECT_FALSE(one.is_error()) << one.output();
  EXPECT_EQ(ReadFile("c.py"), "a = 5\nb = 1\n");
  auto absent = Run("edit_file", R"({"path":"c.py","old_string":"zzz","new_string":"y"})");
  EXPECT_NE(absent.output().find("was not found"), std::string::npos);
  auto all =
      Run("edit_file", R"({"path":"c.py","old_string":" = ","new_string":"=","replace_all":true})");
  EXPECT_FALSE(all.is_error());
  EXPECT_EQ(ReadFile("c.py"), "a=5\nb=1\n");
  EXPECT_TRUE(Run("edit_file", R"({"path":"c.py","old_string":"","new_string":"y"})").is_error());
  EXPECT_TRUE(
      Run("edit_file", R"({"path":"/etc/hosts","old_string":"a","new_string":"b"})").is_error());
}

TEST_F(ToolsTest, ListFilesGlobs) {
  WriteFile("src/a.py", "");
  WriteFile("src/sub/b.py", "");
  WriteFile("README.md", "");
  WriteFile(".git/config", "");
  EXPECT_EQ(Run("list_files", R"({"pattern":"*.py"})").output(), "src/a.py\nsrc/sub/b.py\n");
  EXPECT_EQ(Run("list_files", R"({"pattern":"src/*.py"})").output(), "src/a.py\n");
  EXPECT_EQ(Run("list_files", R"({"pattern":"**/b.py"})").output(), "src/sub/b.py\n");
  EXPECT_EQ(Run("list_files", R"({"pattern":"*","path":"src"})").output(),
            "a.py\nsub/\nsub/b.py\n");
  auto lim = Run("list_files", R"({"pattern":"**","limit":2})");
  EXPECT_TRUE(lim.truncated());
  EXPECT_NE(lim.output().find("more; narrow the pattern"), std::string::npos);
  EXPECT_NE(Run("list_files", R"({"pattern":"*","path":"nope"})").output().find("path not found"),
            std::string::npos);
}

TEST_F(ToolsTest, GrepFindsMatchesWithLimitAndRejectsBadRegex) {
  WriteFile("x.txt", "alpha\nBeta\ngamma beta\n");
  WriteFile("y.md", "beta\n");
  EXPECT_EQ(Run("grep", R"({"pattern":"beta","glob":"*.txt"})").output(), "x.txt:3: gamma beta\n");
  EXPECT_EQ(Run("grep", R"({"pattern":"^beta$","ignore_case":true,"glob":"*.txt"})").output(),
            "x.txt:2: Beta\n");
  auto lim = Run("grep", R"({"pattern":"a","limit":1})");
  EXPECT_TRUE(lim.truncated());
  auto bad = Run("grep", R"({"pattern":"(unclosed"})");
  EXPECT_TRUE(bad.is_error());
  EXPECT_NE(bad.output().find("invalid regular expression"), std::string::npos);
  EXPECT_FALSE(Run("grep", R"({"pattern":"zzz"})").is_error());
}

// Patterns that made glibc's regcomp, grep's engine before Boost.Regex, take hundreds of
// megabytes (found by sandbox_tools_fuzz: stacked `+`), crash (nesting 30,000 deep) or
// search for minutes (back-references).
const char* const kRegexBombs[] = {
    "al++++++++++++++++++++++++++++++++++++++++++++++++++p#txt",  // the fuzzer's input
    "a+++++++++++++++++++",  // 350 MB in glibc 2.36
    ".{1,10000}",            // 790 MB
    "(a?){3000}",
    "((a{100}){100}){100}",
    "(x|y{1,100}){1,100}",
    "a{1,1000}{1,10}",
    "(.?){2000}b",  // 95 MB, and 7 s per 8 KB line
    "(.*)(.*)(.*)(.*)(.*)\\5\\4\\3\\2\\1z",
};
const char* const kOrdinaryPatterns[] = {
    "beta",
    "[0-9a-f]{64}",
    "^(foo|bar)+baz$",
    "[]{}()*+?|]x",
    "[[:alpha:]_][[:alnum:]_]*",
    "\\{\\}\\+\\*",
    "a{32767}",
    ".{0,1000}",
    "a{0,5}b{2,}",
};

// Runs `json` through the grep tool of `registry` in a child whose address space is
// capped at `mib`, which reports through a pipe: 'e' for an error result, 'o' for a
// result, nothing when it died. (An exit status could be reaped first by the tools' own
// child reaper, which earlier tests in this process start.)
char GrepInChild(const ToolRegistry& registry, const std::string& json, rlim_t mib) {
  int fds[2];
  if (pipe(fds) != 0) return 0;
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    rlimit lim{mib << 20, mib << 20};
    setrlimit(RLIMIT_AS, &lim);
    const char answer = registry.Execute("grep", json).is_error() ? 'e' : 'o';
    (void)!write(fds[1], &answer, 1);
    _exit(0);
  }
  close(fds[1]);
  char answer = 0;
  const ssize_t got = read(fds[0], &answer, 1);  // 0 bytes: the child died first
  close(fds[0]);
  waitpid(pid, nullptr, 0);
  return got == 1 ? answer : 0;
}

std::string GrepJson(const std::string& pattern) {
  boost::json::object o{{"pattern", pattern}};
  return boost::json::serialize(o);
}

std::string Nested(size_t depth) { return std::string(depth, '(') + "a" + std::string(depth, ')'); }

// Every former bomb, and nesting far past what any parser recursion takes, comes back as
// an answer (a result or a clear error) inside a 256 MiB address space.
TEST_F(ToolsTest, GrepAnswersEveryRegexBombWithinAQuarterGigabyte) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "an address-sanitized child cannot run under RLIMIT_AS";
#else
  WriteFile("x.txt", "alpha\n" + std::string(8000, 'a') + "\n" + std::string(8000, 'y') + "\n");
  std::vector<std::string> bombs(std::begin(kRegexBombs), std::end(kRegexBombs));
  bombs.push_back(Nested(30000));
  bombs.push_back(Nested(1000000));
  for (const auto& p : bombs) {
    EXPECT_NE(GrepInChild(*registry_, GrepJson(p), 256), 0) << p.substr(0, 60);
  }
#endif
}

TEST_F(ToolsTest, GrepRefusesStackedRepetitionsBackReferencesAndHugePatternsWithClearErrors) {
  WriteFile("x.txt", "alpha\nalphaalpha\n");
  auto stacked = Run("grep", R"({"pattern":"a+++++++++++++++++++++++++++++++++++++++++++++"})");
  EXPECT_TRUE(stacked.is_error());
  EXPECT_NE(stacked.output().find("invalid regular expression"), std::string::npos) << stacked.output();
  auto backref = Run("grep", R"({"pattern":"(alpha)\\1"})");
  EXPECT_TRUE(backref.is_error());
  EXPECT_NE(backref.output().find("without back-references"), std::string::npos) << backref.output();
  auto huge = Run("grep", GrepJson(std::string(4097, 'a')));
  EXPECT_TRUE(huge.is_error());
  EXPECT_NE(huge.output().find("4097 bytes; at most 4096"), std::string::npos) << huge.output();
  EXPECT_FALSE(Run("grep", GrepJson(std::string(4096, 'a'))).is_error());
  for (const char* p : kOrdinaryPatterns) EXPECT_FALSE(Run("grep", GrepJson(p)).is_error()) << p;
  EXPECT_EQ(Run("grep", R"({"pattern":"al{1,2}p"})").output(), "x.txt:1: alpha\nx.txt:2: alphaalpha\n");
  EXPECT_EQ(Run("grep", R"({"pattern":"^(alpha){2}$"})").output(), "x.txt:2: alphaalpha\n");
}

// The attack on glibc's regexec: an unanchored pattern that fails only at the end of a
// long line costs time quadratic in the line (this one took minutes on a 1 MB line).
// Boost.Regex gives up on that line at its work bound; grep says so and goes on.
TEST_F(ToolsTest, GrepSkipsALineWhoseMatchingExceedsTheWorkBoundAndSaysWhere) {
  std::string minified;
  for (int i = 0; i < 170000; ++i) minified += "alpha ";
  WriteFile("bundle.js", minified + "\nabcdefgz here\n" + minified + "needle\n");
  auto slow = Run("grep", R"({"pattern":"a.*b.*c.*d.*e.*f.*g.*z"})");
  EXPECT_FALSE(slow.is_error()) << slow.output();
  EXPECT_TRUE(slow.truncated());
  EXPECT_NE(slow.output().find("bundle.js:2: abcdefgz here"), std::string::npos) << slow.output();
  EXPECT_NE(slow.output().find("line(s) not searched: matching the pattern there exceeded"),
            std::string::npos) << slow.output();
  EXPECT_NE(slow.output().find("first at bundle.js:1"), std::string::npos) << slow.output();
  // An ordinary pattern searches the same long lines to their ends.
  auto needle = Run("grep", R"({"pattern":"needle$"})");
  EXPECT_FALSE(needle.truncated()) << needle.output();
  EXPECT_EQ(needle.output().substr(0, 13), "bundle.js:3: ") << needle.output().substr(0, 100);
}

// Found by sandbox_tools_fuzz: a pattern of many ambiguous groups costs its length squared
// at every position of a line. Boost.Regex's own bound for a line grows with that square
// (about 8 s for this 3.3 KB pattern on a 60-character line, 25 s on 200 characters), so a
// few such lines took the whole call and the call's time budget, checked between lines,
// overran by a line. grep bounds each line's work itself and checks the budget inside it.
std::string AmbiguousGroups() {
  std::string p;
  for (int i = 0; i < 300; ++i) p += "(a|aa|a*)*x";
  return p;
}

TEST_F(ToolsTest, GrepBoundsEachLinesWorkAgainstAmbiguousPatterns) {
  std::string lines;
  for (int i = 0; i < 4; ++i) lines += std::string(200, 'a') + "\n";
  WriteFile("x.txt", lines);
  auto out = Run("grep", GrepJson(AmbiguousGroups()));
  EXPECT_FALSE(out.is_error()) << out.output();
  EXPECT_TRUE(out.truncated());
  // Every line is given up at the per-line bound, well inside the 30 s budget of the call.
  EXPECT_NE(out.output().find("[4 line(s) not searched"), std::string::npos) << out.output();
  EXPECT_EQ(out.output().find("[stopped after"), std::string::npos) << out.output();
}

// Without a per-line bound the search of this line would not end (the pattern's ways to
// match grow exponentially with the line): the time budget stops it inside the line.
TEST_F(ToolsTest, GrepKeepsItsTimeBudgetInsideALine) {
  WriteFile("x.txt", std::string(60, 'a') + "\n");
  ToolConfig unbounded_line = config_;
  unbounded_line.grep_line_states = UINT64_MAX;
  unbounded_line.grep_time_budget = std::chrono::milliseconds(50);
  auto out = ToolRegistry(unbounded_line).Execute("grep", GrepJson(AmbiguousGroups()));
  EXPECT_FALSE(out.is_error()) << out.output();
  EXPECT_TRUE(out.truncated());
  EXPECT_NE(out.output().find("[stopped after 50 ms"), std::string::npos) << out.output();
  EXPECT_EQ(out.output().find("not searched"), std::string::npos) << out.output();
}

// Found by sandbox_tools_fuzz: a 3.7 KB pattern of nested alternations took 0.2-2.8 s per
// line before the matcher gave up (its reads of the line were bounded, not the empty
// steps between them), so a large file took the whole time budget. Each line's search is
// bounded in matcher states now, and a pattern given up on that many lines stops the call
// with a message that says why, long before any time budget.
std::string NestedAlternations() {
  std::string p;
  for (int i = 0; i < 230; ++i) p += "((a|b)*|(a|c)*|";
  p += "a";
  for (int i = 0; i < 230; ++i) p += ")";
  return p + "x";
}

TEST_F(ToolsTest, GrepStopsAPatternTooAmbiguousForItsLinesOverALargeFile) {
  ASSERT_GT(NestedAlternations().size(), 3600u);
  std::string lines;
  for (int i = 0; i < 40000; ++i) lines += std::string(200, 'a') + "\n";  // 8 MB
  WriteFile("big.txt", lines);
  ToolConfig patient = config_;
  patient.grep_time_budget = std::chrono::minutes(10);  // the time budget decides nothing here
  auto out = ToolRegistry(patient).Execute("grep", GrepJson(NestedAlternations()));
  EXPECT_FALSE(out.is_error()) << out.output();
  EXPECT_TRUE(out.truncated());
  EXPECT_NE(out.output().find("[16 line(s) not searched: matching the pattern there exceeded"),
            std::string::npos) << out.output();
  EXPECT_NE(out.output().find("first at big.txt:1;"), std::string::npos) << out.output();
  EXPECT_NE(out.output().find("[stopped after 16 lines exceeded that bound, 1 file(s) searched; "
                              "the pattern is too ambiguous"),
            std::string::npos) << out.output();
  EXPECT_EQ(out.output().find("[stopped after 600000 ms"), std::string::npos) << out.output();
  // The same file with an ordinary pattern is searched to its end.
  auto ordinary = ToolRegistry(patient).Execute("grep", R"({"pattern":"^a*b"})");
  EXPECT_FALSE(ordinary.truncated()) << ordinary.output();
  EXPECT_EQ(ordinary.output().substr(0, 20), "no matches for '^a*b") << ordinary.output();
}

TEST_F(ToolsTest, GrepStopsAtItsTimeBudgetAndAtCancellationAndSaysSo) {
  WriteFile("a.txt", "one\ntwo\n");
  WriteFile("b.txt", "one\n");
  ToolConfig no_time = config_;
  no_time.grep_time_budget = std::chrono::milliseconds(0);
  auto out_of_time = ToolRegistry(no_time).Execute("grep", R"({"pattern":"one"})");
  EXPECT_FALSE(out_of_time.is_error());
  EXPECT_TRUE(out_of_time.truncated());
  EXPECT_NE(out_of_time.output().find("[stopped after 0 ms, 1 file(s) searched"), std::string::npos)
      << out_of_time.output();
  RunContext gave_up;
  gave_up.cancelled = [] { return true; };
  auto cancelled = registry_->Execute("grep", R"({"pattern":"one"})", gave_up);
  EXPECT_TRUE(cancelled.truncated());
  EXPECT_NE(cancelled.output().find("[stopped: the call was cancelled]"), std::string::npos)
      << cancelled.output();
  EXPECT_EQ(Run("grep", R"({"pattern":"one","glob":"a.txt"})").output(), "a.txt:1: one\n");
}

// write_file and edit_file never follow a link out of the workspace, whichever way the
// kernel resolves (openat2, or the O_NOFOLLOW walk of older kernels).
class BeneathTest : public ToolsTest, public ::testing::WithParamInterface<bool> {
 protected:
  void SetUp() override {
    ToolsTest::SetUp();
    SetOpenat2ForTesting(GetParam());
    fs::create_directories(root_ / "outside");
    std::ofstream(root_ / "outside" / "secret") << "host";
    fs::create_directory_symlink(root_ / "outside", config_.workspace / "out");
    fs::create_symlink(root_ / "outside" / "secret", config_.workspace / "secret-link");
  }
  void TearDown() override {
    SetOpenat2ForTesting(true);
    ToolsTest::TearDown();
  }
};

TEST_P(BeneathTest, LinksOutOfTheWorkspaceAreNeverFollowed) {
  if (GetParam() && !HaveOpenat2()) GTEST_SKIP() << "this kernel has no openat2";
  auto through_dir = Run("write_file", R"({"path":"out/x","content":"escaped"})");
  EXPECT_TRUE(through_dir.is_error());
  EXPECT_FALSE(fs::exists(root_ / "outside" / "x"));
  auto nested = Run("write_file", R"({"path":"out/new/deeper/x","content":"escaped"})");
  EXPECT_TRUE(nested.is_error());
  EXPECT_FALSE(fs::exists(root_ / "outside" / "new"));
  auto edit = Run("edit_file", R"({"path":"secret-link","old_string":"host","new_string":"pwned"})");
  EXPECT_TRUE(edit.is_error()) << edit.output();
  // A link out of the workspace as the final name is refused, never written through.
  auto through_link = Run("write_file", R"({"path":"secret-link","content":"mine"})");
  EXPECT_TRUE(through_link.is_error()) << through_link.output();
  std::ifstream in(root_ / "outside" / "secret");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "host");
  // Ordinary nested writes still work.
  EXPECT_FALSE(Run("write_file", R"({"path":"a/b/c.txt","content":"ok"})").is_error());
  EXPECT_EQ(ReadFile("a/b/c.txt"), "ok");
}

INSTANTIATE_TEST_SUITE_P(Resolution, BeneathTest, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? std::string("openat2") : std::string("nofollow_walk");
                         });

TEST(OutputLimiterTest, KeepsHeadAndTail) {
  OutputLimiter lim(10);
  lim.Append("0123456789abcdef");
  EXPECT_TRUE(lim.truncated());
  auto out = lim.Finish();
  EXPECT_EQ(out.rfind("01234", 0), 0u);
  EXPECT_EQ(out.substr(out.size() - 5), "bcdef");
  EXPECT_NE(out.find("6 bytes truncated"), std::string::npos);
}

TEST(OutputLimiterTest, SanitizeUtf8) {
  EXPECT_EQ(SanitizeUtf8("h\xC3\xA9llo"), "h\xC3\xA9llo");
  EXPECT_EQ(SanitizeUtf8("\xC3"), "\xEF\xBF\xBD");
  EXPECT_EQ(SanitizeUtf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
}

}  // namespace
}  // namespace sinew::sandbox
