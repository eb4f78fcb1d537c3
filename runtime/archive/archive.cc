#include "runtime/archive/archive.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace skyrl::archive {
namespace fs = std::filesystem;
namespace {

using ArchivePtr = std::unique_ptr<struct archive, int (*)(struct archive*)>;

absl::Status ArchiveError(struct archive* a, absl::string_view what) {
  const char* msg = archive_error_string(a);
  return absl::InvalidArgumentError(absl::StrCat(what, ": ", msg ? msg : "unknown libarchive error"));
}

struct Sink {
  std::string* out;
  int64_t max;
  bool over = false;
};

la_ssize_t WriteToString(struct archive*, void* client, const void* buf, size_t n) {
  auto* sink = static_cast<Sink*>(client);
  if (int64_t(sink->out->size() + n) > sink->max) {
    sink->over = true;
    return -1;
  }
  sink->out->append(static_cast<const char*>(buf), n);
  return la_ssize_t(n);
}

// Components of a relative path, without "." ones.
std::vector<std::string> Components(const std::string& path) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(path, '/', absl::SkipEmpty()))
    if (part != ".") out.emplace_back(part);
  return out;
}

// True when some folder on the way from `dest` to `rel`'s parent is a symlink: writing
// there would follow it, possibly out of `dest`.
bool ParentCrossesSymlink(const fs::path& dest, const std::vector<std::string>& parts) {
  fs::path p = dest;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    p /= parts[i];
    struct stat st;
    if (lstat(p.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) return true;
  }
  return false;
}

absl::Status Unpack(struct archive* a, const fs::path& dest, const Limits& limits) {
  struct archive_entry* entry = nullptr;
  int64_t unpacked = 0;
  int entries = 0;
  while (true) {
    int r = archive_read_next_header(a, &entry);
    if (r == ARCHIVE_EOF) return absl::OkStatus();
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN) return ArchiveError(a, "working_dir archive");
    if (++entries > limits.max_entries)
      return absl::ResourceExhaustedError(
          absl::StrCat("working_dir archive: more than ", limits.max_entries, " entries"));
    const char* raw = archive_entry_pathname(entry);
    std::string path = raw ? raw : "";
    if (absl::Status s = CheckEntryPath(path); !s.ok()) return s;
    std::vector<std::string> parts = Components(path);
    if (parts.empty()) continue;  // "./"
    std::string shown = absl::StrCat("working_dir entry \"", path, "\"");
    if (archive_entry_hardlink(entry) != nullptr)
      return absl::InvalidArgumentError(absl::StrCat(shown, ": hard links are refused"));
    if (ParentCrossesSymlink(dest, parts))
      return absl::InvalidArgumentError(absl::StrCat(shown, ": lies under a symlink of the archive"));
    fs::path target = dest;
    for (const std::string& p : parts) target /= p;
    std::error_code ec;
    switch (archive_entry_filetype(entry)) {
      case AE_IFDIR:
        fs::create_directories(target, ec);
        if (ec) return absl::InternalError(absl::StrCat(shown, ": ", ec.message()));
        break;
      case AE_IFREG: {
        int64_t size = archive_entry_size(entry);
        if (size < 0 || unpacked + size > limits.max_unpacked_bytes)
          return absl::ResourceExhaustedError(absl::StrCat("working_dir archive: unpacks to more than ",
                                                           limits.max_unpacked_bytes, " bytes (at ", shown,
                                                           ")"));
        fs::create_directories(target.parent_path(), ec);
        if (ec) return absl::InternalError(absl::StrCat(shown, ": ", ec.message()));
        mode_t mode = (archive_entry_perm(entry) & 0100) ? 0755 : 0644;
        int fd = open(target.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        if (fd < 0)
          return absl::InvalidArgumentError(absl::StrCat(shown, ": cannot create: ", strerror(errno)));
        char buf[64 * 1024];
        la_ssize_t n;
        absl::Status status;
        while ((n = archive_read_data(a, buf, sizeof buf)) > 0) {
          unpacked += n;
          if (unpacked > limits.max_unpacked_bytes) {
            status = absl::ResourceExhaustedError(absl::StrCat("working_dir archive: unpacks to more than ",
                                                               limits.max_unpacked_bytes, " bytes"));
            break;
          }
          if (write(fd, buf, size_t(n)) != n) {
            status = absl::InternalError(absl::StrCat(shown, ": write failed: ", strerror(errno)));
            break;
          }
        }
        close(fd);
        if (!status.ok()) return status;
        if (n < 0) return ArchiveError(a, shown);
        break;
      }
      case AE_IFLNK: {
        const char* link = archive_entry_symlink(entry);
        std::string to = link ? link : "";
        if (to.empty() || to[0] == '/')
          return absl::InvalidArgumentError(
              absl::StrCat(shown, ": symlink to \"", to, "\" leaves the working directory"));
        for (absl::string_view part : absl::StrSplit(to, '/'))
          if (part == "..")
            return absl::InvalidArgumentError(absl::StrCat(
                shown, ": symlink to \"", to, "\" uses '..' and could leave the working directory"));
        fs::create_directories(target.parent_path(), ec);
        if (symlink(to.c_str(), target.c_str()) != 0)
          return absl::InvalidArgumentError(
              absl::StrCat(shown, ": cannot create symlink: ", strerror(errno)));
        break;
      }
      case AE_IFCHR:
      case AE_IFBLK:
        return absl::InvalidArgumentError(absl::StrCat(shown, ": device files are refused"));
      case AE_IFIFO:
        return absl::InvalidArgumentError(absl::StrCat(shown, ": FIFOs are refused"));
      default:
        return absl::InvalidArgumentError(absl::StrCat(shown, ": this kind of entry is refused"));
    }
  }
}

}  // namespace

absl::Status CheckEntryPath(const std::string& path) {
  std::string shown = absl::StrCat("working_dir entry \"", path, "\"");
  if (path.empty()) return absl::InvalidArgumentError("working_dir entry with an empty path");
  if (path.size() > 4096)
    return absl::InvalidArgumentError(absl::StrCat(shown.substr(0, 80), "...: path too long"));
  if (path.find('\0') != std::string::npos)
    return absl::InvalidArgumentError(absl::StrCat(shown, ": NUL in path"));
  if (path[0] == '/') return absl::InvalidArgumentError(absl::StrCat(shown, ": absolute paths are refused"));
  for (absl::string_view part : absl::StrSplit(path, '/'))
    if (part == "..") return absl::InvalidArgumentError(absl::StrCat(shown, ": '..' is refused"));
  return absl::OkStatus();
}

absl::StatusOr<std::string> PackDirectory(const std::string& dir, int64_t max_bytes,
                                          absl::string_view field) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", dir, " is not a directory"));
  std::string out;
  Sink sink{&out, max_bytes};
  ArchivePtr a(archive_write_new(), archive_write_free);
  archive_write_add_filter_gzip(a.get());
  // The same content packs to the same bytes (its digest names it): no time in the gzip header.
  if (archive_write_set_options(a.get(), "gzip:!timestamp") != ARCHIVE_OK)
    return ArchiveError(a.get(), "packing the working directory");
  archive_write_set_format_pax_restricted(a.get());
  archive_write_set_bytes_in_last_block(a.get(), 1);
  if (archive_write_open(a.get(), &sink, nullptr, WriteToString, nullptr) != ARCHIVE_OK)
    return ArchiveError(a.get(), "packing the working directory");
  auto fail = [&](absl::string_view what) -> absl::Status {
    if (sink.over)
      return absl::FailedPreconditionError(
          absl::StrCat(field, ": ", dir, " packs to more than ", max_bytes, " bytes (compressed)"));
    return ArchiveError(a.get(), what);
  };
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::none, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const fs::path& p = it->path();
    std::string rel = p.lexically_relative(dir).generic_string();  // fs::relative would follow symlinks
    std::unique_ptr<archive_entry, void (*)(archive_entry*)> e(archive_entry_new(), archive_entry_free);
    archive_entry_set_pathname(e.get(), rel.c_str());
    struct stat st;
    if (lstat(p.c_str(), &st) != 0) continue;
    archive_entry_set_mtime(e.get(), st.st_mtime, 0);
    if (S_ISLNK(st.st_mode)) {
      archive_entry_set_filetype(e.get(), AE_IFLNK);
      archive_entry_set_perm(e.get(), 0777);
      archive_entry_set_symlink(e.get(), fs::read_symlink(p, ec).c_str());
      if (archive_write_header(a.get(), e.get()) != ARCHIVE_OK) return fail(rel);
    } else if (S_ISDIR(st.st_mode)) {
      archive_entry_set_filetype(e.get(), AE_IFDIR);
      archive_entry_set_perm(e.get(), 0755);
      if (archive_write_header(a.get(), e.get()) != ARCHIVE_OK) return fail(rel);
    } else if (S_ISREG(st.st_mode)) {
      archive_entry_set_filetype(e.get(), AE_IFREG);
      archive_entry_set_perm(e.get(), st.st_mode & 0777);
      archive_entry_set_size(e.get(), st.st_size);
      if (archive_write_header(a.get(), e.get()) != ARCHIVE_OK) return fail(rel);
      std::ifstream in(p, std::ios::binary);
      char buf[64 * 1024];
      while (in) {
        in.read(buf, sizeof buf);
        if (in.gcount() > 0 && archive_write_data(a.get(), buf, size_t(in.gcount())) < 0) return fail(rel);
      }
    }
  }
  if (ec) return absl::InvalidArgumentError(absl::StrCat("--working-dir: ", dir, ": ", ec.message()));
  if (archive_write_close(a.get()) != ARCHIVE_OK) return fail("finishing the archive");
  return out;
}

absl::Status UnpackTarGz(const std::string& data, const std::string& dest, const Limits& limits) {
  if (int64_t(data.size()) > limits.max_archive_bytes)
    return absl::ResourceExhaustedError(absl::StrCat(
        "working_dir archive: ", data.size(), " bytes, more than the limit of ", limits.max_archive_bytes));
  std::error_code ec;
  if (fs::exists(dest, ec)) return absl::FailedPreconditionError(absl::StrCat(dest, " exists already"));
  if (!fs::create_directories(dest, ec) || ec)
    return absl::InternalError(absl::StrCat("cannot create ", dest, ": ", ec.message()));
  ArchivePtr a(archive_read_new(), archive_read_free);
  archive_read_support_filter_gzip(a.get());
  archive_read_support_format_tar(a.get());
  absl::Status s;
  if (archive_read_open_memory(a.get(), data.data(), data.size()) != ARCHIVE_OK) {
    s = ArchiveError(a.get(), "working_dir archive is not a tar.gz");
  } else {
    s = Unpack(a.get(), dest, limits);
  }
  if (!s.ok()) fs::remove_all(dest, ec);
  return s;
}

std::string Sha256Digest(const std::string& bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(bytes.data(), bytes.size(), md, &n, EVP_sha256(), nullptr);
  return absl::StrCat("sha256:", absl::BytesToHexString(absl::string_view(reinterpret_cast<char*>(md), n)));
}

}  // namespace skyrl::archive
