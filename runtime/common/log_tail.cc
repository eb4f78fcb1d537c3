#include "runtime/common/log_tail.h"

#include <fstream>

namespace skyrl {

std::vector<std::string> TailLines(const std::string& path, size_t max_lines, size_t max_bytes) {
  std::vector<std::string> lines;
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in || max_lines == 0) return lines;
  std::streamoff size = in.tellg();
  std::streamoff start = size > std::streamoff(max_bytes) ? size - std::streamoff(max_bytes) : 0;
  in.seekg(start);
  std::string text(size_t(size - start), '\0');
  in.read(text.data(), std::streamsize(text.size()));
  text.resize(size_t(in.gcount()));
  size_t begin = 0;
  if (start > 0) {  // the first line is probably cut: drop it unless it is all we have
    size_t nl = text.find('\n');
    if (nl != std::string::npos && nl + 1 < text.size()) begin = nl + 1;
  }
  for (size_t pos = begin; pos < text.size();) {
    size_t nl = text.find('\n', pos);
    size_t end = nl == std::string::npos ? text.size() : nl;
    lines.push_back(text.substr(pos, end - pos));
    pos = end + 1;
  }
  if (lines.size() > max_lines) lines.erase(lines.begin(), lines.end() - long(max_lines));
  return lines;
}

}  // namespace skyrl
