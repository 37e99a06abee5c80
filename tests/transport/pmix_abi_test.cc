// transport/src/pmix_abi.h against the PMIx headers of this machine: every size, offset and
// constant the PMIx service relies on (built only where pmix.h is installed, e.g. Debian's
// libpmix-dev).
#include <pmix.h>

#include <cstddef>
#include <string_view>
#include <type_traits>

#include "../../transport/src/pmix_abi.h"

namespace abi = threelc::transport::detail::pmix;

static_assert(std::is_same_v<abi::Status, pmix_status_t>);
static_assert(std::is_same_v<abi::Rank, pmix_rank_t>);
static_assert(std::is_same_v<abi::DataType, pmix_data_type_t>);
static_assert(std::is_same_v<abi::Scope, pmix_scope_t>);
static_assert(std::is_same_v<abi::Directives, pmix_info_directives_t>);
static_assert(abi::kSuccess == PMIX_SUCCESS);
static_assert(abi::kOperationSucceeded == PMIX_OPERATION_SUCCEEDED);
static_assert(abi::kBool == PMIX_BOOL);
static_assert(abi::kString == PMIX_STRING);
static_assert(abi::kGlobal == PMIX_GLOBAL);
static_assert(abi::kMaxNamespace == PMIX_MAX_NSLEN);
static_assert(abi::kMaxKey == PMIX_MAX_KEYLEN);
static_assert(std::string_view(abi::kCollectData) == PMIX_COLLECT_DATA);

static_assert(sizeof(abi::Proc) == sizeof(pmix_proc_t));
static_assert(offsetof(abi::Proc, rank) == offsetof(pmix_proc_t, rank));
static_assert(sizeof(abi::Value) == sizeof(pmix_value_t));
static_assert(alignof(abi::Value) == alignof(pmix_value_t));
static_assert(offsetof(abi::Value, data) == offsetof(pmix_value_t, data));
static_assert(sizeof(abi::Info) == sizeof(pmix_info_t));
static_assert(offsetof(abi::Info, flags) == offsetof(pmix_info_t, flags));
static_assert(offsetof(abi::Info, value) == offsetof(pmix_info_t, value));

int main() { return 0; }
