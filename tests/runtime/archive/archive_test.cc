// Working-directory archives: a packed folder unpacks to the same files; crafted archives
// with absolute paths, '..', escaping symlinks, links, device files and oversized contents are
// refused naming the entry, and nothing is written outside the destination.
#include "runtime/archive/archive.h"

#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/time/clock.h"
#include "tests/util/paths.h"

namespace skyrl::archive {
namespace {
namespace fs = std::filesystem;

struct Entry {
  std::string path;
  int type = AE_IFREG;
  std::string data;  // regular files
  std::string link;  // symlink target, or hard link target
  bool hardlink = false;
  int64_t declared_size = -1;  // lie about the size when >= 0
};

la_ssize_t Append(struct archive*, void* out, const void* buf, size_t n) {
  static_cast<std::string*>(out)->append(static_cast<const char*>(buf), n);
  return la_ssize_t(n);
}

// Writes entries exactly as given (libarchive does not check paths on write).
std::string Craft(const std::vector<Entry>& entries) {
  std::string out;
  struct archive* a = archive_write_new();
  archive_write_add_filter_gzip(a);
  archive_write_set_format_pax_restricted(a);
  archive_write_open(a, &out, nullptr, Append, nullptr);
  for (const Entry& e : entries) {
    struct archive_entry* ae = archive_entry_new();
    archive_entry_set_pathname(ae, e.path.c_str());
    archive_entry_set_filetype(ae, e.type);
    archive_entry_set_perm(ae, 0644);
    if (e.hardlink) archive_entry_set_hardlink(ae, e.link.c_str());
    if (e.type == AE_IFLNK) archive_entry_set_symlink(ae, e.link.c_str());
    if (e.type == AE_IFREG)
      archive_entry_set_size(ae, e.declared_size >= 0 ? e.declared_size : int64_t(e.data.size()));
    if (e.type == AE_IFCHR) archive_entry_set_rdev(ae, 0x0103);
    archive_write_header(a, ae);
    if (e.type == AE_IFREG && !e.data.empty()) archive_write_data(a, e.data.data(), e.data.size());
    archive_entry_free(ae);
  }
  archive_write_close(a);
  archive_write_free(a);
  return out;
}

std::string Read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class ArchiveTest : public ::testing::Test {
 protected:
  void SetUp() override { root_ = testing::MakeTempDir("archive"); }
  void TearDown() override { fs::remove_all(root_); }
  // Unpacks into root/dest; returns the status. root/outside must never appear.
  absl::Status UnpackCrafted(const std::vector<Entry>& entries, const Limits& limits = {}) {
    absl::Status s = UnpackTarGz(Craft(entries), root_ + "/dest", limits);
    EXPECT_FALSE(fs::exists(root_ + "/outside")) << "something was written outside the destination";
    if (!s.ok()) {
      EXPECT_FALSE(fs::exists(root_ + "/dest")) << "a refused archive leaves nothing behind";
    }
    return s;
  }
  std::string root_;
};

TEST_F(ArchiveTest, PackedFolderUnpacksToTheSameFiles) {
  fs::create_directories(root_ + "/src/sub/deeper");
  std::ofstream(root_ + "/src/main.py") << "print('hi')\n";
  std::ofstream(root_ + "/src/sub/deeper/data.bin") << std::string(200000, 'x');
  fs::create_symlink("sub/deeper/data.bin", root_ + "/src/link");
  fs::permissions(root_ + "/src/main.py", fs::perms::owner_all);
  absl::StatusOr<std::string> packed = PackDirectory(root_ + "/src");
  ASSERT_TRUE(packed.ok()) << packed.status();
  EXPECT_LT(packed->size(), 10000u) << "compressed";
  absl::Status unpacked = UnpackTarGz(*packed, root_ + "/dest");
  ASSERT_TRUE(unpacked.ok()) << unpacked;
  EXPECT_EQ(Read(root_ + "/dest/main.py"), "print('hi')\n");
  EXPECT_EQ(Read(root_ + "/dest/sub/deeper/data.bin"), std::string(200000, 'x'));
  EXPECT_EQ(fs::read_symlink(root_ + "/dest/link"), "sub/deeper/data.bin");
  EXPECT_TRUE((fs::status(root_ + "/dest/main.py").permissions() & fs::perms::owner_exec) != fs::perms::none);
  EXPECT_TRUE(absl::IsFailedPrecondition(UnpackTarGz(*packed, root_ + "/dest"))) << "dest must be new";
  EXPECT_TRUE(absl::IsFailedPrecondition(PackDirectory(root_ + "/src", 100).status()))
      << "over the size limit";
  EXPECT_TRUE(absl::IsInvalidArgument(PackDirectory(root_ + "/missing").status()));
}

TEST_F(ArchiveTest, TheSameFolderPacksToTheSameBytesInAnotherSecond) {
  fs::create_directories(root_ + "/src/sub");
  std::ofstream(root_ + "/src/sub/data.txt") << "payload";
  absl::StatusOr<std::string> first = PackDirectory(root_ + "/src");
  ASSERT_TRUE(first.ok()) << first.status();
  absl::SleepFor(absl::Milliseconds(1100));  // gzip headers hold seconds
  absl::StatusOr<std::string> second = PackDirectory(root_ + "/src");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(*first == *second) << "a working directory is stored under its content's digest";
}

TEST_F(ArchiveTest, RefusesAbsoluteAndDotDotPaths) {
  absl::Status s = UnpackCrafted({{"ok.txt", AE_IFREG, "fine"}, {root_ + "/outside", AE_IFREG, "evil"}});
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("absolute paths are refused"), std::string::npos) << s;
  s = UnpackCrafted({{"../outside", AE_IFREG, "evil"}});
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("\"../outside\": '..' is refused"), std::string::npos) << s;
  s = UnpackCrafted({{"a/../../outside", AE_IFREG, "evil"}});
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
}

TEST_F(ArchiveTest, RefusesSymlinksThatLeaveAndWritesThroughSymlinks) {
  absl::Status s = UnpackCrafted({{"up", AE_IFLNK, "", root_}});
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("leaves the working directory"), std::string::npos) << s;
  s = UnpackCrafted({{"up", AE_IFLNK, "", "sub/../.."}});
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("uses '..'"), std::string::npos) << s;
  // A symlink inside, then a file written "through" it: refused, never followed.
  s = UnpackCrafted({{"d", AE_IFDIR}, {"l", AE_IFLNK, "", "d"}, {"l/outside", AE_IFREG, "x"}});
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("lies under a symlink"), std::string::npos) << s;
}

TEST_F(ArchiveTest, RefusesLinksDevicesAndFifos) {
  absl::Status s = UnpackCrafted({{"a", AE_IFREG, "x"}, {"b", AE_IFREG, "", "/etc/passwd", true}});
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("hard links are refused"), std::string::npos) << s;
  s = UnpackCrafted({{"dev", AE_IFCHR}});
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("\"dev\": device files are refused"), std::string::npos) << s;
  s = UnpackCrafted({{"pipe", AE_IFIFO}});
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("FIFOs are refused"), std::string::npos) << s;
}

TEST_F(ArchiveTest, EnforcesLimits) {
  Limits small;
  small.max_unpacked_bytes = 1000;
  absl::Status s = UnpackCrafted({{"big", AE_IFREG, std::string(5000, 'z')}}, small);
  EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
  small = Limits{};
  small.max_entries = 3;
  s = UnpackCrafted({{"1", AE_IFREG, "a"}, {"2", AE_IFREG, "b"}, {"3", AE_IFREG, "c"}, {"4", AE_IFREG, "d"}},
                    small);
  EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
  small = Limits{};
  small.max_archive_bytes = 10;
  s = UnpackCrafted({{"1", AE_IFREG, "a"}}, small);
  EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
  s = UnpackTarGz("this is not a tar.gz at all", root_ + "/dest");
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_FALSE(fs::exists(root_ + "/dest"));
}

}  // namespace
}  // namespace skyrl::archive
