// Every spdlog message while it lives, to count what a component said (once, not at all).
#pragma once

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace accelmon::testing {

class LogCapture {
 public:
  LogCapture() : previous_(spdlog::default_logger()), sink_(std::make_shared<Sink>()) {
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink_));
  }
  ~LogCapture() { spdlog::set_default_logger(previous_); }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;
  // Messages that contain `needle`.
  size_t Count(const std::string& needle) { return sink_->Count(needle); }

 private:
  class Sink final : public spdlog::sinks::base_sink<std::mutex> {
   public:
    size_t Count(const std::string& needle) {
      std::lock_guard lock(mutex_);
      size_t n = 0;
      for (const std::string& line : lines_) n += line.find(needle) != std::string::npos;
      return n;
    }

   protected:
    void sink_it_(const spdlog::details::log_msg& msg) override {
      lines_.emplace_back(msg.payload.data(), msg.payload.size());
    }
    void flush_() override {}

   private:
    std::vector<std::string> lines_;
  };
  std::shared_ptr<spdlog::logger> previous_;
  std::shared_ptr<Sink> sink_;
};

}  // namespace accelmon::testing
