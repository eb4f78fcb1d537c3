#include "runtime/common/lease.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

namespace skyrl {
namespace {

std::string Path(const std::string& name) { return ::testing::TempDir() + "/lease_test." + name; }

TEST(LeaseTest, AFreshLeaseHasNoDeadlineAndTheReaderSeesEachExtension) {
  auto writer = LeaseWriter::Create(Path("fresh"));
  ASSERT_TRUE(writer.ok()) << writer.status();
  auto reader = LeaseReader::Open((*writer)->path());
  ASSERT_TRUE(reader.ok()) << reader.status();
  const int64_t far = MonotonicNowNs() + int64_t(1e15);
  EXPECT_EQ(reader->Overdue(far), std::nullopt) << "no deadline until the writer sets one";

  const int64_t before = MonotonicNowNs();
  (*writer)->ExtendFor(absl::Seconds(10));
  const int64_t after = MonotonicNowNs();
  EXPECT_EQ(reader->Overdue(after), std::nullopt);
  // The deadline is 10 s past a moment between `before` and `after`.
  std::optional<absl::Duration> late = reader->Overdue(after + int64_t(12e9));
  ASSERT_TRUE(late.has_value());
  EXPECT_GE(*late, absl::Seconds(2));
  EXPECT_LE(*late, absl::Seconds(2) + absl::Nanoseconds(after - before));

  (*writer)->ExtendFor(absl::ZeroDuration());  // passed at once
  EXPECT_TRUE(reader->Overdue(MonotonicNowNs() + 1).has_value());
  (*writer)->ExtendFor(absl::InfiniteDuration());
  EXPECT_EQ(reader->Overdue(far), std::nullopt);
}

TEST(LeaseTest, AnotherProcessSeesTheDeadlineMove) {
  auto writer = LeaseWriter::Create(Path("shared"));
  ASSERT_TRUE(writer.ok()) << writer.status();
  (*writer)->ExtendFor(absl::Seconds(30));
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto reader = LeaseReader::Open((*writer)->path());
    if (!reader.ok()) _exit(2);
    // Holds now; passed once the parent moves the deadline to now (waits at most 10 s).
    if (reader->Overdue(MonotonicNowNs()).has_value()) _exit(3);
    for (int i = 0; i < 10000; ++i) {
      if (reader->Overdue(MonotonicNowNs()).has_value()) _exit(0);
      usleep(1000);
    }
    _exit(4);
  }
  usleep(50 * 1000);
  (*writer)->ExtendFor(absl::ZeroDuration());
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "2: no open, 3: passed too early, 4: never saw it pass";
}

TEST(LeaseTest, BadFilesAreRefusedByName) {
  auto missing = LeaseReader::Open(Path("missing"));
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_NE(missing.status().message().find("lease_test.missing"), absl::string_view::npos);
  {
    std::ofstream out(Path("text"));
    out << "not a lease at all";
  }
  auto text = LeaseReader::Open(Path("text"));
  EXPECT_TRUE(absl::IsInvalidArgument(text.status())) << text.status();
  auto nowhere = LeaseWriter::Create("/nonexistent-dir/lease");
  EXPECT_TRUE(absl::IsNotFound(nowhere.status())) << nowhere.status();
}

TEST(LeaseTest, TheWriterRemovesItsFile) {
  std::string path;
  {
    auto writer = LeaseWriter::Create(Path("removed"));
    ASSERT_TRUE(writer.ok()) << writer.status();
    path = (*writer)->path();
    EXPECT_TRUE(LeaseReader::Open(path).ok());
  }
  EXPECT_TRUE(absl::IsNotFound(LeaseReader::Open(path).status()));
}

}  // namespace
}  // namespace skyrl
