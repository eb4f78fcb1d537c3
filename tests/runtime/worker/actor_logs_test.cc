// LogFollower over real files another writer appends to: where a tail of N lines starts, what
// each read returns, and a log that starts anew.
#include "runtime/worker/actor_logs.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "tests/util/paths.h"

namespace skyrl::worker {
namespace {

class LogFollowerTest : public ::testing::Test {
 protected:
  void SetUp() override { path_ = testing::MakeTempDir("actor-logs") + "/actor.log"; }
  void Append(const std::string& text) {
    std::ofstream out(path_, std::ios::binary | std::ios::app);
    out << text;
  }
  // Everything from the follower's position to the end.
  static std::string Drain(LogFollower& f) {
    std::string all;
    for (std::string more = f.ReadMore(7); !more.empty(); more = f.ReadMore(7)) all += more;
    return all;
  }
  std::string path_;
};

TEST_F(LogFollowerTest, AMissingFileIsNotFound) {
  EXPECT_TRUE(absl::IsNotFound(LogFollower::Open(path_ + ".none").status()));
}

TEST_F(LogFollowerTest, TailsStartAtTheLastLines) {
  Append("one\ntwo\nthree\n");
  absl::StatusOr<LogFollower> f = LogFollower::Open(path_);
  ASSERT_TRUE(f.ok());
  f->SeekToLastLines(0);
  EXPECT_EQ(Drain(*f), "one\ntwo\nthree\n");
  f->SeekToLastLines(1);
  EXPECT_EQ(Drain(*f), "three\n");
  f->SeekToLastLines(2);
  EXPECT_EQ(Drain(*f), "two\nthree\n");
  f->SeekToLastLines(3);
  EXPECT_EQ(Drain(*f), "one\ntwo\nthree\n");
  f->SeekToLastLines(50);
  EXPECT_EQ(Drain(*f), "one\ntwo\nthree\n") << "more lines than there are";

  Append("partial");  // a last line still being written counts as a line
  f->SeekToLastLines(2);
  EXPECT_EQ(Drain(*f), "three\npartial");
}

TEST_F(LogFollowerTest, TailsReachAcrossReadBlocks) {
  const std::string long_line(100 << 10, 'x');  // longer than one backwards block
  Append(absl::StrCat("first\n", long_line, "\nlast\n"));
  absl::StatusOr<LogFollower> f = LogFollower::Open(path_);
  ASSERT_TRUE(f.ok());
  f->SeekToLastLines(2);
  EXPECT_EQ(f->offset(), 6);
  std::string tail;
  for (std::string more = f->ReadMore(); !more.empty(); more = f->ReadMore()) tail += more;
  EXPECT_EQ(tail, absl::StrCat(long_line, "\nlast\n"));
}

TEST_F(LogFollowerTest, ReadsWhatIsAppendedAndStartsAgainWhenTheLogDoes) {
  Append("a\n");
  absl::StatusOr<LogFollower> f = LogFollower::Open(path_);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(Drain(*f), "a\n");
  EXPECT_EQ(f->ReadMore(), "") << "nothing new";
  Append("b\nc\n");
  EXPECT_EQ(f->ReadMore(2), "b\n") << "at most max_bytes";
  EXPECT_EQ(f->ReadMore(), "c\n");
  std::ofstream(path_, std::ios::binary | std::ios::trunc) << "new\n";  // shorter than what was read
  EXPECT_EQ(Drain(*f), "new\n");
}

}  // namespace
}  // namespace skyrl::worker
