#include "collectors/shared_library.h"

#include <dlfcn.h>

namespace accelmon::collectors {

SharedLibrary::SharedLibrary(const std::string& path) : path_(path) {
  // RTLD_LOCAL: vendor symbols must not leak into other libraries' lookups.
  handle_ = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle_ == nullptr) {
    const char* e = ::dlerror();
    error_ = e != nullptr ? e : "dlopen failed";
  }
}

SharedLibrary::~SharedLibrary() {
  if (handle_ != nullptr) ::dlclose(handle_);
}

void* SharedLibrary::Symbol(const char* name) const {
  if (handle_ == nullptr) return nullptr;
  return ::dlsym(handle_, name);
}

}  // namespace accelmon::collectors
