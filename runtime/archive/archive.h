// Working-directory archives: a folder packed into a tar.gz on the submitting side, and
// unpacked with every entry checked first (by the head for a job, by a worker for an actor's
// runtime_env working_dir).
//
// Unpacking refuses, naming the entry: absolute paths, ".." components, symlinks whose target
// is absolute or leaves the folder, hard links, device files, FIFOs and sockets, and archives
// over the size or entry limits. Nothing is written outside `dest`, and a refused archive
// leaves `dest` removed. libarchive does the format work; its errors are converted here.
// Functions only; safe for concurrent use on different folders.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace skyrl::archive {

struct Limits {
  int64_t max_archive_bytes = 100ll << 20;  // compressed, as uploaded
  int64_t max_unpacked_bytes = 1ll << 30;   // all regular files together
  int max_entries = 100000;
};

// Packs the regular files, folders and symlinks under `dir` (paths relative to it) into a
// gzip-compressed tar in memory. FailedPrecondition when the result would pass `max_bytes`;
// errors name `field` (where the folder came from).
absl::StatusOr<std::string> PackDirectory(const std::string& dir,
                                          int64_t max_bytes = Limits{}.max_archive_bytes,
                                          absl::string_view field = "--working-dir");

// Unpacks `data` into `dest` (created; must not exist yet). InvalidArgument naming the entry
// for anything refused above; ResourceExhausted past a limit.
absl::Status UnpackTarGz(const std::string& data, const std::string& dest, const Limits& limits = {});

// Checks one entry path (as stored in an archive) without touching the disk.
absl::Status CheckEntryPath(const std::string& path);

// "sha256:" and the lowercase hex SHA-256 of `bytes`: how working directories are named.
std::string Sha256Digest(const std::string& bytes);

}  // namespace skyrl::archive
