// Boxes: the unit of sharding. A shard of a tensor under TP/PP/EP is a union of boxes
// (hyper-rectangles of indices), and an FSDP flat range decomposes into a few boxes, so the
// planner intersects boxes instead of listing one interval per row: a row-parallel split of
// a [7168, 16384] weight is one box, not 7,168 intervals.
//
// Boxes live in *byte space*: the tensor's shape with the last dimension multiplied by the
// element size (a scalar is [element size]). Every byte range is then a box region too, and
// flat shards may cut anywhere.
//
// Plain values; no thread-safety concerns.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "weight_sync/plan/model.h"

namespace skyrl::weight_sync {

inline constexpr int kMaxDims = 6;

// The byte-space shape of a parameter.
struct ByteShape {
  int ndim = 0;
  std::array<int64_t, kMaxDims> dims{};

  static ByteShape Of(const Param& p);
  int64_t Volume() const;
};

// [lo[d], hi[d]) on each of `ndim` dimensions.
struct Box {
  int ndim = 0;
  std::array<int64_t, kMaxDims> lo{};
  std::array<int64_t, kMaxDims> hi{};

  static Box Full(const ByteShape& s);
  int64_t Volume() const;
  bool Empty() const;
  bool operator==(const Box& o) const;
  bool operator<(const Box& o) const;  // lexicographic on lo, then hi
  std::string DebugString() const;
};

// The intersection; Empty() when they do not meet. REQUIRES: a.ndim == b.ndim.
Box Intersect(const Box& a, const Box& b);

// A contiguous byte range: [offset, offset + length).
struct Interval {
  int64_t offset = 0;
  int64_t length = 0;
  bool operator==(const Interval& o) const { return offset == o.offset && length == o.length; }
};

// The byte ranges `box` covers in the row-major layout of `outer` (a box containing it),
// offset by `base`, in increasing order with adjacent runs merged. `outer`'s row-major layout
// is how a rank stores one box of its shard. Calls `fn(offset, length)` per run, so that
// callers with millions of runs need not build a vector. REQUIRES: box inside outer.
template <typename Fn>
void ForEachRun(const Box& outer, const Box& box, int64_t base, Fn&& fn);

// Same, as a vector, relative to the full tensor (outer = Box::Full(shape), base 0).
std::vector<Interval> ToIntervals(const ByteShape& shape, const Box& box);

// Decomposes the flat byte range [begin, end) of a row-major tensor into at most 2*ndim-1
// boxes, in increasing offset order.
std::vector<Box> FlatRangeToBoxes(const ByteShape& shape, int64_t begin, int64_t end);

// ---- implementation of the template ----
template <typename Fn>
void ForEachRun(const Box& outer, const Box& box, int64_t base, Fn&& fn) {
  const int n = outer.ndim;
  if (box.Empty()) return;
  // Strides of outer's row-major layout.
  std::array<int64_t, kMaxDims> stride{};
  int64_t s = 1;
  for (int d = n - 1; d >= 0; --d) {
    stride[d] = s;
    s *= outer.hi[d] - outer.lo[d];
  }
  // Find the first dim k such that dims k+1.. are full in box relative to outer: then a
  // run spans box's extent on dim k times stride[k].
  int k = n - 1;
  while (k > 0 && box.lo[k] == outer.lo[k] && box.hi[k] == outer.hi[k]) --k;
  const int64_t run = (box.hi[k] - box.lo[k]) * stride[k];
  // Iterate indices on dims 0..k-1.
  std::array<int64_t, kMaxDims> idx{};
  for (int d = 0; d < k; ++d) idx[d] = box.lo[d];
  int64_t pending_off = -1, pending_len = 0;
  while (true) {
    int64_t off = base + (box.lo[k] - outer.lo[k]) * stride[k];
    for (int d = 0; d < k; ++d) off += (idx[d] - outer.lo[d]) * stride[d];
    if (pending_off >= 0 && pending_off + pending_len == off) {
      pending_len += run;
    } else {
      if (pending_off >= 0) fn(pending_off, pending_len);
      pending_off = off;
      pending_len = run;
    }
    int d = k - 1;
    for (; d >= 0; --d) {
      if (++idx[d] < box.hi[d]) break;
      idx[d] = box.lo[d];
    }
    if (d < 0) break;
  }
  if (pending_off >= 0) fn(pending_off, pending_len);
}

}  // namespace skyrl::weight_sync
