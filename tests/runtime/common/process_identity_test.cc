#include "runtime/common/process_identity.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace skyrl {
namespace {

// A child that sleeps until killed.
pid_t Sleeper() {
  pid_t pid = fork();
  if (pid == 0) {
    pause();
    _exit(0);
  }
  return pid;
}

TEST(ProcessIdentityTest, ThisMachinesSpaceNamesTheBootAndThePidNamespace) {
  const std::string space = ProcessSpace();
  ASSERT_FALSE(space.empty());
  EXPECT_NE(space.find('/'), std::string::npos) << space;
  EXPECT_EQ(space, ProcessSpace()) << "the same for every call in one process";
}

TEST(ProcessIdentityTest, ARunningProcessIsNotGoneAndAnExitedOneIs) {
  pid_t child = Sleeper();
  ASSERT_GT(child, 0);
  absl::StatusOr<int64_t> start = ProcessStartTicks(child);
  ASSERT_TRUE(start.ok()) << start.status();
  EXPECT_GT(*start, 0);
  EXPECT_FALSE(ProcessGone(child, *start));
  EXPECT_TRUE(ProcessGone(child, *start + 1)) << "another start time: the pid was reused";

  kill(child, SIGKILL);
  // Killed but not yet reaped: a zombie, which runs nothing.
  for (int i = 0; i < 200 && !ProcessGone(child, *start); ++i) usleep(5000);
  EXPECT_TRUE(ProcessGone(child, *start));
  EXPECT_TRUE(absl::IsNotFound(ProcessStartTicks(child).status()));
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(ProcessGone(child, *start));
}

TEST(ProcessIdentityTest, WhatCannotBeCheckedIsNeverCalledGone) {
  absl::StatusOr<int64_t> self = ProcessStartTicks(getpid());
  ASSERT_TRUE(self.ok()) << self.status();
  EXPECT_FALSE(ProcessGone(getpid(), *self));
  EXPECT_FALSE(ProcessGone(0, *self)) << "no pid";
  EXPECT_FALSE(ProcessGone(getpid(), 0)) << "no start time";
  EXPECT_TRUE(absl::IsInvalidArgument(ProcessStartTicks(-1).status()));
}

}  // namespace
}  // namespace skyrl
