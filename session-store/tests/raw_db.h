// Test helper for session-store tests that damage a store directory through raw RocksDB.
// Needs session-store/src (keys.h) on the include path.
#pragma once

#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include <memory>
#include <string>
#include <vector>

#include "keys.h"

namespace sinew::store::test {

// Opens the store directory with raw RocksDB to damage it the way bugs or disks would.
class RawDb {
 public:
  explicit RawDb(const std::string& dir) {
    std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
    for (const char* name : keys::kColumnFamilies)
      cfs.emplace_back(name, rocksdb::ColumnFamilyOptions());
    rocksdb::DB* raw = nullptr;
    EXPECT_TRUE(rocksdb::DB::Open(rocksdb::DBOptions(), dir, cfs, &handles_, &raw).ok());
    db_.reset(raw);
  }
  ~RawDb() {
    for (auto* h : handles_) db_->DestroyColumnFamilyHandle(h).PermitUncheckedError();
  }
  void Put(int family, const std::string& key, const std::string& value) {
    ASSERT_TRUE(
        db_->Put(rocksdb::WriteOptions(), handles_[static_cast<size_t>(family)], key, value).ok());
  }
  void Delete(int family, const std::string& key) {
    ASSERT_TRUE(
        db_->Delete(rocksdb::WriteOptions(), handles_[static_cast<size_t>(family)], key).ok());
  }

 private:
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
  std::unique_ptr<rocksdb::DB> db_;
};

}  // namespace sinew::store::test
