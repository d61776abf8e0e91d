// File upload and download of the sandbox API (PUT and GET /v1/sandboxes/{id}/files;
// docs/sandbox-api.md, "Files") end to end: real sinew-store, sinew-sandboxd with runc
// sandboxes and sinew-harness. What a sandbox plants (links, fifos) stands for hostile
// code inside it.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>

#include "sandbox_api_fixture.h"

namespace sinew::harness::test {
namespace {

std::string RandomBinary(size_t n) {
  std::mt19937 gen(7);
  std::string out(n, '\0');
  for (auto& c : out) c = static_cast<char>(gen() & 0xff);
  for (size_t i = 0; i < n; i += 1000) out[i] = '\0';
  return out;
}

class SandboxFilesTest : public SandboxApiTest {
 protected:
  static Reply Put(const std::string& base, const char* key, const std::string& id,
                   const std::string& query, const std::string& data) {
    return Call("PUT", base + "/v1/sandboxes/" + id + "/files" + query, data,
                {"Authorization: Bearer " + std::string(key), "Content-Type: application/octet-stream"});
  }
  static Reply Get(const std::string& base, const char* key, const std::string& id,
                   const std::string& query) {
    return Call("GET", base + "/v1/sandboxes/" + id + "/files" + query, "",
                {"Authorization: Bearer " + std::string(key)});
  }
  static std::string ErrorCode(const Reply& r) {
    if (!r.json.is_object() || !r.json.as_object().contains("error")) return "<no error: " + r.body.substr(0, 200) + ">";
    return std::string(r.json.at("error").at("code").as_string());
  }
};

TEST_F(SandboxFilesTest, AnUploadedFileDownloadsByteIdenticalAndBothAreAudited) {
  auto h = StartHarness("h", R"(, "max_request_bytes": 8388608)");
  const std::string base = h->url();
  const std::string id = Create(base, kKeyA);
  ASSERT_FALSE(id.empty());
  const std::string data = RandomBinary(3 * 1024 * 1024 + 777);
  auto put = Put(base, kKeyA, id, "?path=out/deep/blob.bin", data);
  ASSERT_EQ(put.status, 201) << put.body;
  EXPECT_EQ(put.json.at("file").at("path").as_string(), "/workspace/out/deep/blob.bin");
  EXPECT_EQ(put.json.at("file").at("size").as_int64(), static_cast<int64_t>(data.size()));
  // The sandbox sees the same bytes: its own sha256sum agrees, and the file is its user's.
  const std::string sha(put.json.at("file").at("sha256").as_string());
  EXPECT_EQ(Output(Exec(base, kKeyA, id, "sha256sum < /workspace/out/deep/blob.bin | cut -c1-64")), sha + "\n");
  EXPECT_EQ(Output(Exec(base, kKeyA, id, "stat -c %u /workspace/out/deep/blob.bin")), "1000\n");
  auto got = Get(base, kKeyA, id, "?path=%2Fworkspace%2Fout%2Fdeep%2Fblob.bin");
  ASSERT_EQ(got.status, 200) << got.body.substr(0, 300);
  EXPECT_EQ(got.Header("content-type"), "application/octet-stream");
  EXPECT_EQ(got.body.size(), data.size());
  EXPECT_TRUE(got.body == data) << "the bytes that came back differ from those sent";
  // A file the sandbox wrote comes out; an empty one too; a replaced file keeps its mode.
  ASSERT_EQ(Exec(base, kKeyA, id, "printf 'made inside' > made; : > empty; echo old > run.sh; chmod 750 run.sh").status, 200);
  EXPECT_EQ(Get(base, kKeyA, id, "?path=made").body, "made inside");
  auto empty = Get(base, kKeyA, id, "?path=empty");
  EXPECT_EQ(empty.status, 200);
  EXPECT_EQ(empty.body, "");
  ASSERT_EQ(Put(base, kKeyA, id, "?path=run.sh", "#!/bin/sh\necho new\n").status, 201);
  EXPECT_EQ(Output(Exec(base, kKeyA, id, "stat -c %a run.sh && ./run.sh")), "750\nnew\n");
  auto actions = AuditActions(base, kKeyA, id);
  EXPECT_EQ(std::count(actions.begin(), actions.end(), "sandbox_upload"), 2);
  EXPECT_EQ(std::count(actions.begin(), actions.end(), "sandbox_download"), 3);
  auto audit = Api("GET", base + "/v1/audit?limit=1000", kKeyA);
  EXPECT_NE(audit.body.find("path /workspace/out/deep/blob.bin " + std::to_string(data.size()) + " bytes"),
            std::string::npos)
      << audit.body;
}

TEST_F(SandboxFilesTest, PathsOutsideTheWorkspaceAreRefusedWith400AndNothingIsWritten) {
  auto h = StartHarness("h");
  const std::string base = h->url();
  const std::string id = Create(base, kKeyA);
  ASSERT_FALSE(id.empty());
  for (const std::string query :
       {"?path=../../etc/passwd", "?path=/etc/passwd", "?path=%2Fworkspace%2F..%2Ftmp%2Fx", "?path=/workspace",
        "?path=/workspace/", "?path=/tmp/x", "?path=a%00b", "?path=", "", "?path=%ff%fe"}) {
    auto put = Put(base, kKeyA, id, query, "planted");
    EXPECT_EQ(put.status, 400) << query << ": " << put.body;
    EXPECT_EQ(ErrorCode(put), "invalid_argument") << query;
    auto get = Get(base, kKeyA, id, query);
    EXPECT_EQ(get.status, 400) << query << ": " << get.body.substr(0, 200);
  }
  // Neither written nor read: nothing in the workspace or at /tmp/x, no record in the audit log.
  EXPECT_EQ(Output(Exec(base, kKeyA, id, "ls -A /workspace | wc -l; test -e /tmp/x || echo no-tmp-x")),
            "0\nno-tmp-x\n");
  EXPECT_EQ(AuditActions(base, kKeyA, id), (std::vector<std::string>{"sandbox_create", "sandbox_execute"}));
  // Other refusals: no such file, no media type of a file, the wrong method.
  auto missing = Get(base, kKeyA, id, "?path=nothing-here");
  EXPECT_EQ(missing.status, 404) << missing.body;
  auto as_json = Call("PUT", base + "/v1/sandboxes/" + id + "/files?path=x", "{}",
                      {"Authorization: Bearer " + std::string(kKeyA), "Content-Type: application/json"});
  EXPECT_EQ(as_json.status, 415) << as_json.body;
  auto post = Call("POST", base + "/v1/sandboxes/" + id + "/files?path=x", "x",
                   {"Authorization: Bearer " + std::string(kKeyA), "Content-Type: application/octet-stream"});
  EXPECT_EQ(post.status, 405) << post.body;
}

TEST_F(SandboxFilesTest, LinksAndFifosTheSandboxPlantsAreNeverFollowedOrWaitedOn) {
  auto h = StartHarness("h");
  const std::string base = h->url();
  const std::string id = Create(base, kKeyA);
  ASSERT_FALSE(id.empty());
  auto planted = Exec(base, kKeyA, id,
                      "echo original > /tmp/target && cd /workspace && ln -s /etc/shadow shadow && "
                      "ln -s /proc/self/environ environ && ln -s /proc/1/root/etc/passwd root && "
                      "ln -s /tmp tmpdir && ln -s /tmp/target target && mkfifo fifo && mkdir dir && "
                      "echo inside > real && ln -s real inlink && echo planted");
  ASSERT_EQ(Output(planted), "planted\n") << planted.body;
  // A link that stays inside the workspace is followed.
  EXPECT_EQ(Get(base, kKeyA, id, "?path=inlink").body, "inside\n");
  for (const char* path : {"shadow", "environ", "root", "tmpdir/target", "target", "fifo", "dir"}) {
    auto got = Get(base, kKeyA, id, std::string("?path=") + path);
    EXPECT_EQ(got.status, 400) << path << ": " << got.body.substr(0, 300);
    EXPECT_EQ(ErrorCode(got), "invalid_argument") << path;
  }
  // Through a link out of the workspace, as the final name or a directory, nothing is written.
  for (const char* path : {"target", "shadow", "tmpdir/target", "tmpdir/new", "dir"}) {
    auto put = Put(base, kKeyA, id, std::string("?path=") + path, "overwritten");
    EXPECT_EQ(put.status, 400) << path << ": " << put.body;
  }
  // A fifo, or a link that stays inside, as the final name is replaced by the file, never
  // written through (no wait for a reader).
  ASSERT_EQ(Put(base, kKeyA, id, "?path=fifo", "not a fifo").status, 201);
  ASSERT_EQ(Put(base, kKeyA, id, "?path=inlink", "replaced").status, 201);
  EXPECT_EQ(Output(Exec(base, kKeyA, id,
                        "cat /tmp/target; test -e /tmp/new || echo no-new; test -L target && echo still-a-link; "
                        "test -f fifo && cat fifo; echo; test -L inlink || cat inlink; echo; cat real")),
            "original\nno-new\nstill-a-link\nnot a fifo\nreplaced\ninside\n");
}

TEST_F(SandboxFilesTest, FilesOverTheBoundsAre413AndLeaveNothing) {
  auto h = StartHarness("h", R"(, "max_request_bytes": 3145728)");
  const std::string base = h->url();
  // A 1 MiB workspace: a 2 MiB upload fits the request bound, not the workspace.
  const std::string id = Create(base, kKeyA, R"({"disk_bytes": 1048576})");
  ASSERT_FALSE(id.empty());
  auto full = Put(base, kKeyA, id, "?path=big", std::string(2 * 1024 * 1024, 'b'));
  EXPECT_EQ(full.status, 413) << full.body;
  EXPECT_EQ(ErrorCode(full), "payload_too_large");
  auto over = Put(base, kKeyA, id, "?path=bigger", std::string(3 * 1024 * 1024 + 1, 'c'));
  EXPECT_EQ(over.status, 413) << over.body;
  EXPECT_EQ(Output(Exec(base, kKeyA, id, "ls -A /workspace | wc -l")), "0\n")
      << "no file and no temporary file is left";
  // A download larger than the bound.
  const std::string id2 = Create(base, kKeyA);
  ASSERT_FALSE(id2.empty());
  ASSERT_EQ(Exec(base, kKeyA, id2, "head -c 3145729 /dev/zero > huge").status, 200);
  auto big = Get(base, kKeyA, id2, "?path=huge");
  EXPECT_EQ(big.status, 413) << big.body.substr(0, 300);
  EXPECT_EQ(ErrorCode(big), "payload_too_large");
}

TEST_F(SandboxFilesTest, AnotherTenantsOrANotReadySandboxIsRefusedAndKeepsItsFiles) {
  auto h = StartHarness("h");
  const std::string base = h->url();
  const std::string id = Create(base, kKeyA);
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(Put(base, kKeyA, id, "?path=mine", "a's").status, 201);
  auto put = Put(base, kKeyB, id, "?path=mine", "b's");
  EXPECT_EQ(put.status, 404) << put.body;
  auto get = Get(base, kKeyB, id, "?path=mine");
  EXPECT_EQ(get.status, 404) << get.body;
  EXPECT_EQ(Get(base, kKeyA, id, "?path=mine").body, "a's");
  EXPECT_TRUE(AuditActions(base, kKeyB, "").empty());
  ASSERT_EQ(Call("DELETE", base + "/v1/sandboxes/" + id, "", {"Authorization: Bearer " + std::string(kKeyA)}).status,
            200);
  auto late = Put(base, kKeyA, id, "?path=late", "x");
  EXPECT_EQ(late.status, 409) << late.body;
  EXPECT_EQ(Get(base, kKeyA, id, "?path=mine").status, 409);
}

TEST_F(SandboxFilesTest, TheCliCopiesFilesInAndOut) {
  auto h = StartHarness("h");
  const std::string base = h->url();
  const std::string id = Create(base, kKeyA);
  ASSERT_FALSE(id.empty());
  const std::string data = RandomBinary(200000);
  const std::string local = dir_.Sub("local.bin");
  std::ofstream(local, std::ios::binary) << data;
  CliResult in = Sinew(base, kKeyA, {"sandbox", "cp", local, id + ":in/local.bin"});
  ASSERT_EQ(in.exit, 0) << in.out;
  EXPECT_EQ(in.out.rfind("/workspace/in/local.bin  200000 bytes  sha256 ", 0), 0u) << in.out;
  const std::string back = dir_.Sub("back.bin");
  CliResult out = Sinew(base, kKeyA, {"sandbox", "cp", id + ":/workspace/in/local.bin", back});
  ASSERT_EQ(out.exit, 0) << out.out;
  std::ifstream f(back, std::ios::binary);
  EXPECT_TRUE(std::string(std::istreambuf_iterator<char>(f), {}) == data);
  // Into a directory: under the remote name.
  std::filesystem::create_directories(dir_.Sub("into"));
  CliResult into_dir = Sinew(base, kKeyA, {"sandbox", "cp", id + ":in/local.bin", dir_.Sub("into")});
  EXPECT_EQ(into_dir.exit, 0) << into_dir.out;
  EXPECT_EQ(std::filesystem::file_size(dir_.Sub("into/local.bin")), data.size());
  // Refusals: both sides local, a path outside the workspace, another tenant's sandbox.
  EXPECT_EQ(Sinew(base, kKeyA, {"sandbox", "cp", local, back}).exit, 2);
  CliResult outside = Sinew(base, kKeyA, {"sandbox", "cp", local, id + ":/etc/passwd"});
  EXPECT_EQ(outside.exit, 2) << outside.out;
  EXPECT_EQ(Sinew(base, kKeyB, {"sandbox", "cp", id + ":in/local.bin", back}).exit, 2);
}

}  // namespace
}  // namespace sinew::harness::test
