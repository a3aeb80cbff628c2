// The Prometheus text exposition format 0.0.4, written straight into reused strings: what
// /metrics serves. Samples arrive grouped by node, but the format wants them grouped by family,
// so each family collects its lines in a buffer of its own; the buffers keep their capacity from
// one scrape to the next, so a steady-state scrape allocates nothing per series. /metrics writes
// (or compresses) the families' buffers one after the other, never copying them into one string.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "daemon/exporter/metric_sink.h"

namespace accelmon {

class TextExpositionSink final : public MetricSink {
 public:
  // Starts a new exposition; the families and lines of the previous one are forgotten, their
  // buffers kept.
  void Clear();

  size_t Family(std::string_view name, std::string_view help, MetricKind kind) override;
  void Sample(size_t family, std::span<const Label> labels, double value) override;

  // Appends every family that has samples, in declaration order, each with its HELP and TYPE
  // lines once, to `out`.
  void AppendTo(std::string& out) const;

  // The same as pieces to write one after the other, without copying them into one string:
  // one per family with samples (its HELP and TYPE lines, then its samples). They point into
  // this sink and stay valid until its next Clear() or Family().
  void Pieces(std::vector<std::string_view>& pieces) const;

  // Samples (series) written since Clear().
  size_t samples() const { return samples_; }

 private:
  struct FamilyText {
    std::string name;
    std::string text;  // the HELP and TYPE lines, then the samples
    size_t header_size = 0;
  };

  // The previous sample's labels (copied) and their rendered text "{a=\"x\",b=\"y\"" without
  // the closing brace; ends[i]: where label i's text ends in it. The first `size` are valid.
  struct LabelCache {
    std::vector<std::string> names, values;
    std::vector<size_t> ends;
    std::string text;
    size_t size = 0;
  };
  std::string_view LabelText(std::span<const Label> labels);

  LabelCache cache_;
  std::vector<FamilyText> families_;  // [0, used_) belong to the current exposition
  size_t used_ = 0;
  size_t samples_ = 0;
};

// Building blocks, public for tests.
// A sample value as the shortest text that reads back as the same double: integers (below
// 2^53) without a fraction or exponent, NaN as "NaN", infinities as "+Inf" and "-Inf".
void AppendSampleValue(std::string& out, double value);
// A label value with backslash, double quote and newline escaped.
void AppendLabelValue(std::string& out, std::string_view value);
// HELP text with backslash and newline escaped.
void AppendHelp(std::string& out, std::string_view help);

}  // namespace accelmon
