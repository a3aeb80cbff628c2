// A vendor library loaded at run time (dlopen), so the build never needs a vendor SDK and a node
// without the device simply has no such collector.
#pragma once

#include <string>

namespace accelmon::collectors {

class SharedLibrary {
 public:
  // Loads `path` (a file name searched like dlopen does, or a path). Check loaded() / error().
  explicit SharedLibrary(const std::string& path);
  ~SharedLibrary();
  SharedLibrary(const SharedLibrary&) = delete;
  SharedLibrary& operator=(const SharedLibrary&) = delete;

  bool loaded() const { return handle_ != nullptr; }
  // dlerror()'s text from a failed load.
  const std::string& error() const { return error_; }
  const std::string& path() const { return path_; }

  // The address of `name`, or nullptr when the library lacks it (an older driver).
  void* Symbol(const char* name) const;

  // Typed lookup: Function<nvmlReturn_t (*)(unsigned int*)>("nvmlDeviceGetCount_v2").
  template <typename Fn>
  Fn Function(const char* name) const {
    return reinterpret_cast<Fn>(Symbol(name));
  }

 private:
  std::string path_;
  std::string error_;
  void* handle_ = nullptr;
};

}  // namespace accelmon::collectors
