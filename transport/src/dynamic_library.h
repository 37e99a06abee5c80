// A shared library opened at run time (dlopen), for a service threelc uses only where the job
// has it (a launcher's PMIx or PMI-2), so that the library never needs it to load.
#pragma once

#include <initializer_list>
#include <string>

namespace threelc::transport::detail {

class DynamicLibrary {
 public:
  // The first of `names` that opens (RTLD_NOW | RTLD_LOCAL). Throws Error naming every name
  // tried, dlerror()'s text for each, and `remedy` (what to install or set).
  static DynamicLibrary open(std::initializer_list<const char*> names, const std::string& remedy);

  // The symbol's address as `F` (a function pointer type). Throws Error naming the library
  // and the symbol when it is absent.
  template <typename F>
  F function(const char* symbol) const {
    return reinterpret_cast<F>(address(symbol));
  }
  // The file name it was opened by.
  const std::string& name() const { return name_; }

 private:
  DynamicLibrary(void* handle, std::string name) : handle_(handle), name_(std::move(name)) {}
  void* address(const char* symbol) const;

  void* handle_;  // never closed: threads inside the library may outlive any owner
  std::string name_;
};

}  // namespace threelc::transport::detail
