// Turns a C ABI submission (threelc_tensor + threelc_options) into an Operation, checking every
// field and resolving what the settings decide (compression, sparsity, unnamed tensors).
#pragma once

#include "runtime/engine.h"
#include "runtime/operation.h"
#include "threelc/threelc.h"

namespace threelc::engine {

// Throws EngineError(THREELC_EINVAL) naming the field that is wrong; a process set this rank
// does not know (never added, or removed) or is not a member of is wrong too.
Operation make_operation(Engine& engine, OpKind kind, const threelc_tensor* tensor,
                         const threelc_options* options);
// threelc_add_process_set: `count` job ranks (any order, distinct) become one process set.
Operation make_add_process_set(Engine& engine, const int* ranks, int count);
// threelc_remove_process_set: set `id` (not 0, known on this rank) goes.
Operation make_remove_process_set(Engine& engine, int id);

}  // namespace threelc::engine
