// Where the renderer's samples go. The metric naming contract (names, help, types, labels) is
// written once, in metrics_renderer.cc, against this interface; sinks decide the encoding: the
// Prometheus text format for /metrics (text_exposition.h), or prometheus-cpp MetricFamily
// objects for the OpenMetrics writer and tests.
#pragma once

#include <array>
#include <cassert>
#include <cstddef>
#include <initializer_list>
#include <span>
#include <string_view>

namespace accelmon {

enum class MetricKind { kGauge, kCounter };

// Views into the report being rendered: valid only during the Sample() call.
struct Label {
  std::string_view name;
  std::string_view value;
};

class MetricSink {
 public:
  virtual ~MetricSink() = default;

  // Declares the next family and returns its id (0, 1, 2, ... in declaration order). Families
  // are written in declaration order; a family without samples is not written at all.
  virtual size_t Family(std::string_view name, std::string_view help, MetricKind kind) = 0;

  // One sample of family `family`.
  virtual void Sample(size_t family, std::span<const Label> labels, double value) = 0;
};

// A short list of labels on the stack, so composing a series' labels never allocates. The
// longest is accelmon_device_job_info's: node, device, uuid and up to eleven of a holder's.
class LabelList {
 public:
  static constexpr size_t kCapacity = 16;

  LabelList() = default;
  LabelList(std::initializer_list<Label> labels) {
    for (const Label& l : labels) Push(l.name, l.value);
  }

  void Push(std::string_view name, std::string_view value) {
    assert(size_ < kCapacity);
    labels_[size_++] = {name, value};
  }
  void Pop() { --size_; }
  // This list with one more label, leaving this one as it is.
  LabelList With(std::string_view name, std::string_view value) const {
    LabelList out = *this;
    out.Push(name, value);
    return out;
  }
  std::span<const Label> span() const { return {labels_.data(), size_}; }

 private:
  std::array<Label, kCapacity> labels_{};
  size_t size_ = 0;
};

}  // namespace accelmon
