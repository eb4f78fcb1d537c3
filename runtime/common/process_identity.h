// Which process is which, across processes of one machine: what lets a worker tell the head,
// for certain, that another worker's process is gone (docs/operations.md "Partitions").
//
// A pid alone says little: it may be reused, and a worker in another container (another pid
// namespace) or on another machine sees other processes under the same numbers. So a process
// is named by its space ("<boot id>/<pid namespace device:inode>": the processes that see each other
// under the same pids, until the machine reboots), its pid, and its start time (clock ticks
// after boot, field 22 of /proc/<pid>/stat, which a reused pid does not share).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace skyrl {

// This process's space; empty when /proc cannot say, or is another pid namespace's (then
// nothing is checked).
std::string ProcessSpace();

// The start time of `pid` in clock ticks after boot. NotFound when no such process runs (no
// /proc entry, and kill(pid, 0) finds none), or it has exited and only waits to be reaped (a
// zombie runs nothing); other errors when /proc cannot tell (hidden, denied, unreadable).
absl::StatusOr<int64_t> ProcessStartTicks(int pid);

// True only when the process `pid` that started at `start_ticks`, in this process's space, is
// certainly gone: no such pid, a zombie, or a pid that started at another time. False when it
// runs, and when /proc cannot tell.
bool ProcessGone(int pid, int64_t start_ticks);

}  // namespace skyrl
