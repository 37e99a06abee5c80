// The part of PMIx's C ABI (pmix.h, pmix_common.h; PMIx 3 and later) that the PMIx service
// calls, declared here so that threelc builds without PMIx's headers and loads libpmix at run
// time. tests/transport/pmix_abi_test.cc checks every size, offset and constant against the
// real headers where they are installed.
#pragma once

#include <cstddef>
#include <cstdint>

namespace threelc::transport::detail::pmix {

using Status = int;           // pmix_status_t
using Rank = uint32_t;        // pmix_rank_t
using DataType = uint16_t;    // pmix_data_type_t
using Scope = uint8_t;        // pmix_scope_t
using Directives = uint32_t;  // pmix_info_directives_t

constexpr Status kSuccess = 0;                        // PMIX_SUCCESS
constexpr Status kOperationSucceeded = -157;          // PMIX_OPERATION_SUCCEEDED
constexpr DataType kBool = 1;                         // PMIX_BOOL
constexpr DataType kString = 3;                       // PMIX_STRING
constexpr Scope kGlobal = 3;                          // PMIX_GLOBAL
constexpr const char* kCollectData = "pmix.collect";  // PMIX_COLLECT_DATA (bool)
constexpr size_t kMaxNamespace = 255;                 // PMIX_MAX_NSLEN
constexpr size_t kMaxKey = 511;                       // PMIX_MAX_KEYLEN

struct Proc {  // pmix_proc_t
  char nspace[kMaxNamespace + 1];
  Rank rank;
};

struct Value {  // pmix_value_t: the union's largest member is pmix_envar_t (24 bytes)
  DataType type;
  union {
    bool flag;
    char* string;
    unsigned char bytes[24];
  } data;
};

struct Info {  // pmix_info_t
  char key[kMaxKey + 1];
  Directives flags;
  Value value;
};

// The functions, as pointer types for DynamicLibrary::function().
using InitFn = Status (*)(Proc*, Info*, size_t);
using FinalizeFn = Status (*)(const Info*, size_t);
using PutFn = Status (*)(Scope, const char*, Value*);
using CommitFn = Status (*)();
using FenceFn = Status (*)(const Proc*, size_t, const Info*, size_t);
using GetFn = Status (*)(const Proc*, const char*, const Info*, size_t, Value**);
using ErrorStringFn = const char* (*)(Status);
using VersionFn = const char* (*)();

}  // namespace threelc::transport::detail::pmix
