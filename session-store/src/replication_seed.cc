// A follower's seed: a checkpoint of the primary, streamed in chunks and checked.
#include "replication_seed.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <set>

namespace sinew::store {
namespace {

namespace fs = std::filesystem;

// SHA-256 over bytes fed in pieces.
class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new(), EVP_MD_CTX_free) { EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr); }
  void Add(const char* data, size_t size) { EVP_DigestUpdate(ctx_.get(), data, size); }
  std::string Finish() {
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int size = 0;
    EVP_DigestFinal_ex(ctx_.get(), out, &size);
    return std::string(reinterpret_cast<const char*>(out), size);
  }

 private:
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx_;
};

// An open file descriptor, closed when it goes.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

Status SyncPath(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0 || ::fsync(fd.get()) != 0) return Status::IOError("cannot sync " + path);
  return Status::Ok();
}

// Removes a directory when it goes out of scope, unless released.
class RemoveOnExit {
 public:
  explicit RemoveOnExit(std::string dir) : dir_(std::move(dir)) {}
  ~RemoveOnExit() {
    if (dir_.empty()) return;
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  void Release() { dir_.clear(); }

 private:
  std::string dir_;
};

bool PlainName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

Status WriteAll(int fd, const std::string& path, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n <= 0) return Status::IOError("cannot write " + path);
    data += n;
    size -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace

Status ServeSeed(RocksStore* store, const std::string& scratch_dir, grpc::ServerWriter<v1::SeedChunk>* out) {
  std::error_code ec;
  fs::remove_all(scratch_dir, ec);
  RemoveOnExit cleanup(scratch_dir);
  SINEW_ASSIGN_OR_RETURN(const uint64_t sequence, store->CheckpointForSeed(scratch_dir));
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(scratch_dir, ec)) {
    if (!entry.is_regular_file()) return Status::Internal("checkpoint entry " + entry.path().string() + " is not a file");
    names.push_back(entry.path().filename().string());
  }
  if (ec) return Status::IOError("cannot list " + scratch_dir + ": " + ec.message());
  std::sort(names.begin(), names.end());
  v1::SeedChunk chunk;
  auto* manifest = chunk.mutable_manifest();
  manifest->set_sequence(sequence);
  std::string buffer(kSeedChunkBytes, '\0');
  for (const auto& name : names) {
    const std::string path = scratch_dir + "/" + name;
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) return Status::IOError("cannot open " + path);
    Sha256 sha;
    uint64_t size = 0;
    for (ssize_t n; (n = ::read(fd.get(), buffer.data(), buffer.size())) != 0;) {
      if (n < 0) return Status::IOError("cannot read " + path);
      sha.Add(buffer.data(), static_cast<size_t>(n));
      size += static_cast<uint64_t>(n);
    }
    auto* file = manifest->add_files();
    file->set_name(name);
    file->set_size(size);
    file->set_sha256(sha.Finish());
  }
  if (!out->Write(chunk)) return Status::Cancelled("the follower went away");
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string path = scratch_dir + "/" + names[i];
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) return Status::IOError("cannot open " + path);
    uint64_t offset = 0;
    for (ssize_t n; (n = ::read(fd.get(), buffer.data(), buffer.size())) != 0;) {
      if (n < 0) return Status::IOError("cannot read " + path);
      v1::SeedChunk data;
      data.mutable_data()->set_file(static_cast<uint32_t>(i));
      data.mutable_data()->set_offset(offset);
      data.mutable_data()->set_bytes(buffer.data(), static_cast<size_t>(n));
      if (!out->Write(data)) return Status::Cancelled("the follower went away");
      offset += static_cast<uint64_t>(n);
    }
  }
  return Status::Ok();
}

Result<uint64_t> ReceiveSeed(grpc::ClientReader<v1::SeedChunk>* in, const std::string& dir,
                             const std::vector<std::string>& keep_files) {
  const std::string tmp = dir + ".seeding";
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  if (ec) return Status::IOError("cannot create " + tmp + ": " + ec.message());
  RemoveOnExit cleanup(tmp);

  v1::SeedChunk chunk;
  if (!in->Read(&chunk) || !chunk.has_manifest()) {
    grpc::Status s = in->Finish();
    if (!s.ok()) return Status::Unavailable("seed: " + s.error_message());
    return Status::FailedPrecondition("seed: the primary sent no manifest first");
  }
  const v1::SeedChunk::Manifest manifest = chunk.manifest();
  std::set<std::string> seen;
  for (const auto& f : manifest.files()) {
    if (!PlainName(f.name()) || !seen.insert(f.name()).second) {
      return Status::FailedPrecondition("seed: the manifest names an unusable file '" + f.name() + "'");
    }
  }
  // Files arrive in manifest order; each is hashed as it is written.
  int current = -1;
  std::unique_ptr<Fd> fd;
  std::unique_ptr<Sha256> sha;
  uint64_t written = 0;
  auto finish_file = [&]() -> Status {
    if (current < 0) return Status::Ok();
    const auto& f = manifest.files(current);
    const std::string path = tmp + "/" + f.name();
    if (written != f.size()) {
      return Status::Corruption("seed: " + f.name() + " has " + std::to_string(written) + " bytes, the manifest says " +
                              std::to_string(f.size()));
    }
    if (sha->Finish() != f.sha256()) return Status::Corruption("seed: " + f.name() + " does not match its SHA-256");
    if (::fsync(fd->get()) != 0) return Status::IOError("cannot sync " + path);
    fd.reset();
    return Status::Ok();
  };
  auto open_file = [&](int index) -> Status {
    SINEW_RETURN_IF_ERROR(finish_file());
    current = index;
    const std::string path = tmp + "/" + manifest.files(index).name();
    fd = std::make_unique<Fd>(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (fd->get() < 0) return Status::IOError("cannot create " + path);
    sha = std::make_unique<Sha256>();
    written = 0;
    return Status::Ok();
  };
  while (in->Read(&chunk)) {
    if (!chunk.has_data()) return Status::FailedPrecondition("seed: a second manifest");
    const auto& data = chunk.data();
    if (data.file() >= static_cast<uint32_t>(manifest.files_size()) || static_cast<int>(data.file()) < current) {
      return Status::FailedPrecondition("seed: bytes for file " + std::to_string(data.file()) + " out of order");
    }
    // Files the stream skips over are empty.
    while (current < static_cast<int>(data.file())) SINEW_RETURN_IF_ERROR(open_file(current + 1));
    if (data.offset() != written || written + data.bytes().size() > manifest.files(current).size()) {
      return Status::FailedPrecondition("seed: bytes at offset " + std::to_string(data.offset()) + " of " +
                                        manifest.files(current).name() + " do not follow the " +
                                        std::to_string(written) + " received");
    }
    SINEW_RETURN_IF_ERROR(WriteAll(fd->get(), manifest.files(current).name(), data.bytes().data(), data.bytes().size()));
    sha->Add(data.bytes().data(), data.bytes().size());
    written += data.bytes().size();
  }
  grpc::Status finished = in->Finish();
  if (!finished.ok()) return Status::Unavailable("seed: the stream ended: " + finished.error_message());
  while (current + 1 < manifest.files_size()) SINEW_RETURN_IF_ERROR(open_file(current + 1));
  SINEW_RETURN_IF_ERROR(finish_file());

  for (const auto& name : keep_files) {
    if (!fs::exists(dir + "/" + name)) continue;
    fs::copy_file(dir + "/" + name, tmp + "/" + name, fs::copy_options::overwrite_existing, ec);
    if (ec) return Status::IOError("cannot keep " + dir + "/" + name + ": " + ec.message());
    SINEW_RETURN_IF_ERROR(SyncPath(tmp + "/" + name));
  }
  SINEW_RETURN_IF_ERROR(SyncPath(tmp));
  if (fs::exists(dir)) {
    if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, dir.c_str(), RENAME_EXCHANGE) != 0) {
      return Status::IOError("cannot swap " + tmp + " in for " + dir);
    }
    // `tmp` now names the old directory, which the cleanup removes.
  } else {
    fs::rename(tmp, dir, ec);
    if (ec) return Status::IOError("cannot move " + tmp + " to " + dir + ": " + ec.message());
    cleanup.Release();
  }
  SINEW_RETURN_IF_ERROR(SyncPath(fs::path(dir).parent_path().empty() ? "." : fs::path(dir).parent_path().string()));
  return manifest.sequence();
}

}  // namespace sinew::store
