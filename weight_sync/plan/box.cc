#include "weight_sync/plan/box.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace skyrl::weight_sync {

ByteShape ByteShape::Of(const Param& p) {
  ByteShape s;
  if (p.shape.empty()) {
    s.ndim = 1;
    s.dims[0] = ElementSize(p.dtype);
    return s;
  }
  s.ndim = static_cast<int>(p.shape.size());
  for (int d = 0; d < s.ndim; ++d) s.dims[d] = p.shape[d];
  s.dims[s.ndim - 1] *= ElementSize(p.dtype);
  return s;
}

int64_t ByteShape::Volume() const {
  int64_t v = 1;
  for (int d = 0; d < ndim; ++d) v *= dims[d];
  return v;
}

Box Box::Full(const ByteShape& s) {
  Box b;
  b.ndim = s.ndim;
  for (int d = 0; d < s.ndim; ++d) b.hi[d] = s.dims[d];
  return b;
}

int64_t Box::Volume() const {
  int64_t v = 1;
  for (int d = 0; d < ndim; ++d) v *= std::max<int64_t>(0, hi[d] - lo[d]);
  return v;
}

bool Box::Empty() const {
  for (int d = 0; d < ndim; ++d)
    if (hi[d] <= lo[d]) return true;
  return ndim == 0;
}

bool Box::operator==(const Box& o) const {
  if (ndim != o.ndim) return false;
  for (int d = 0; d < ndim; ++d)
    if (lo[d] != o.lo[d] || hi[d] != o.hi[d]) return false;
  return true;
}

bool Box::operator<(const Box& o) const {
  if (ndim != o.ndim) return ndim < o.ndim;
  for (int d = 0; d < ndim; ++d)
    if (lo[d] != o.lo[d]) return lo[d] < o.lo[d];
  for (int d = 0; d < ndim; ++d)
    if (hi[d] != o.hi[d]) return hi[d] < o.hi[d];
  return false;
}

std::string Box::DebugString() const {
  std::string s = "[";
  for (int d = 0; d < ndim; ++d) absl::StrAppend(&s, d ? "," : "", lo[d], ":", hi[d]);
  return s + "]";
}

Box Intersect(const Box& a, const Box& b) {
  Box r;
  r.ndim = a.ndim;
  for (int d = 0; d < a.ndim; ++d) {
    r.lo[d] = std::max(a.lo[d], b.lo[d]);
    r.hi[d] = std::min(a.hi[d], b.hi[d]);
  }
  return r;
}

std::vector<Interval> ToIntervals(const ByteShape& shape, const Box& box) {
  std::vector<Interval> out;
  ForEachRun(Box::Full(shape), box, 0, [&](int64_t off, int64_t len) { out.push_back({off, len}); });
  return out;
}

namespace {

// Boxes for [begin, end) within the sub-tensor of dims d.. at fixed prefix indices.
void Decompose(const ByteShape& shape, int d, Box prefix, int64_t begin, int64_t end, std::vector<Box>& out) {
  if (begin >= end) return;
  if (d == shape.ndim - 1) {
    prefix.lo[d] = begin;
    prefix.hi[d] = end;
    out.push_back(prefix);
    return;
  }
  int64_t inner = 1;
  for (int e = d + 1; e < shape.ndim; ++e) inner *= shape.dims[e];
  auto full_rest = [&](Box b) {
    for (int e = d + 1; e < shape.ndim; ++e) {
      b.lo[e] = 0;
      b.hi[e] = shape.dims[e];
    }
    return b;
  };
  int64_t i0 = begin / inner, i1 = end / inner;
  if (i0 == i1) {
    Box b = prefix;
    b.lo[d] = i0;
    b.hi[d] = i0 + 1;
    Decompose(shape, d + 1, b, begin - i0 * inner, end - i0 * inner, out);
    return;
  }
  int64_t first_full = i0;
  if (begin % inner != 0) {
    Box b = prefix;
    b.lo[d] = i0;
    b.hi[d] = i0 + 1;
    Decompose(shape, d + 1, b, begin % inner, inner, out);
    first_full = i0 + 1;
  }
  if (first_full < i1) {
    Box b = full_rest(prefix);
    b.lo[d] = first_full;
    b.hi[d] = i1;
    out.push_back(b);
  }
  if (end % inner != 0) {
    Box b = prefix;
    b.lo[d] = i1;
    b.hi[d] = i1 + 1;
    Decompose(shape, d + 1, b, 0, end % inner, out);
  }
}

}  // namespace

std::vector<Box> FlatRangeToBoxes(const ByteShape& shape, int64_t begin, int64_t end) {
  std::vector<Box> out;
  Box prefix;
  prefix.ndim = shape.ndim;
  Decompose(shape, 0, prefix, std::max<int64_t>(0, begin), std::min(end, shape.Volume()), out);
  return out;
}

}  // namespace skyrl::weight_sync
