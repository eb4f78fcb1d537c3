// WorkingDirs with a fetch function standing in for the head's KV.
#include "runtime/worker/working_dirs.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "runtime/common/ids.h"
#include "tests/util/paths.h"

namespace skyrl::worker {
namespace {

namespace fs = std::filesystem;

class WorkingDirsTest : public ::testing::Test {
 protected:
  void SetUp() override { root_ = testing::MakeTempDir("working-dirs"); }
  void TearDown() override { fs::remove_all(root_); }

  // Packs a folder holding `files` and stores it under its digest; returns the digest.
  std::string Store(const std::map<std::string, std::string>& files) {
    const fs::path src = fs::path(root_) / ("src" + std::to_string(kv_.size()));
    for (const auto& [name, body] : files) {
      fs::create_directories((src / name).parent_path());
      std::ofstream(src / name) << body;
    }
    absl::StatusOr<std::string> packed = archive::PackDirectory(src.string());
    EXPECT_TRUE(packed.ok()) << packed.status();
    std::string digest = archive::Sha256Digest(*packed);
    kv_[std::string(kWorkingDirKeyPrefix) + digest] = *packed;
    return digest;
  }

  WorkingDirs Make() {
    return WorkingDirs(root_ + "/cache", [this](const std::string& key) -> absl::StatusOr<std::string> {
      ++fetches_;
      auto it = kv_.find(key);
      if (it == kv_.end()) return absl::NotFoundError("no such key");
      return it->second;
    });
  }

  std::string root_;
  std::map<std::string, std::string> kv_;
  int fetches_ = 0;
};

TEST_F(WorkingDirsTest, FetchesOnceAndUnpacksEveryFile) {
  std::string digest = Store({{"main.py", "print(1)\n"}, {"pkg/mod.py", "X = 2\n"}});
  WorkingDirs dirs = Make();
  absl::StatusOr<std::string> dir = dirs.Get(digest);
  ASSERT_TRUE(dir.ok()) << dir.status();
  std::ifstream mod(fs::path(*dir) / "pkg/mod.py");
  std::string line;
  std::getline(mod, line);
  EXPECT_EQ(line, "X = 2");
  absl::StatusOr<std::string> again = dirs.Get(digest);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *dir);
  EXPECT_EQ(fetches_, 1) << "the second actor uses the cache";
}

TEST_F(WorkingDirsTest, BadDigestsMissingAndTamperedArchivesAreRefusedLeavingNothing) {
  WorkingDirs dirs = Make();
  EXPECT_TRUE(absl::IsInvalidArgument(dirs.Get("sha256:../../etc").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(dirs.Get("md5:" + std::string(64, 'a')).status()));
  EXPECT_EQ(fetches_, 0) << "a malformed digest is refused before any fetch";

  absl::Status missing = dirs.Get("sha256:" + std::string(64, 'a')).status();
  EXPECT_TRUE(absl::IsNotFound(missing)) << missing;
  EXPECT_NE(missing.message().find("the head has no such archive"), std::string::npos) << missing;

  std::string digest = Store({{"a.txt", "original"}});
  std::string key = std::string(kWorkingDirKeyPrefix) + digest;
  std::string other = Store({{"a.txt", "tampered"}});
  kv_[key] = kv_[std::string(kWorkingDirKeyPrefix) + other];
  absl::Status tampered = dirs.Get(digest).status();
  EXPECT_TRUE(absl::IsDataLoss(tampered)) << tampered;
  std::error_code ec;
  EXPECT_TRUE(!fs::exists(root_ + "/cache", ec) || fs::is_empty(root_ + "/cache", ec))
      << "nothing is left in the cache";
}

TEST_F(WorkingDirsTest, AnArchiveEscapingItsFolderIsRefusedByTheArchiveRules) {
  const fs::path src = fs::path(root_) / "evil";
  fs::create_directories(src);
  fs::create_symlink("/etc/passwd", src / "link");
  absl::StatusOr<std::string> packed = archive::PackDirectory(src.string());
  ASSERT_TRUE(packed.ok()) << packed.status();
  std::string digest = archive::Sha256Digest(*packed);
  kv_[std::string(kWorkingDirKeyPrefix) + digest] = *packed;
  WorkingDirs dirs = Make();
  absl::Status s = dirs.Get(digest).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("link"), std::string::npos) << "names the entry: " << s;
  EXPECT_FALSE(fs::exists(fs::path(root_) / "cache" / digest.substr(7)));
}

}  // namespace
}  // namespace skyrl::worker
