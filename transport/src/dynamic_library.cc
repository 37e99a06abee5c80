#include "dynamic_library.h"

#include <dlfcn.h>

#include "threelc/transport/transport.h"

namespace threelc::transport::detail {

DynamicLibrary DynamicLibrary::open(std::initializer_list<const char*> names,
                                    const std::string& remedy) {
  std::string tried;
  for (const char* name : names) {
    if (void* handle = ::dlopen(name, RTLD_NOW | RTLD_LOCAL)) return {handle, name};
    const char* why = ::dlerror();
    tried += (tried.empty() ? "" : "; ") + std::string(why != nullptr ? why : name);
  }
  throw Error(
      -1, "threelc: cannot load " + std::string(*names.begin()) + " (" + tried + "): " + remedy);
}

void* DynamicLibrary::address(const char* symbol) const {
  ::dlerror();
  void* found = ::dlsym(handle_, symbol);
  if (found == nullptr) {
    throw Error(-1,
                "threelc: " + name_ + " has no " + symbol + " (too old a version of the library?)");
  }
  return found;
}

}  // namespace threelc::transport::detail
