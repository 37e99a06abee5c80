// Turns a C ABI submission (threelc_tensor + threelc_options) into an Operation, checking every
// field and resolving what the settings decide (compression, sparsity, unnamed tensors).
#pragma once

#include "runtime/engine.h"
#include "runtime/operation.h"
#include "threelc/threelc.h"

namespace threelc::engine {

// Throws EngineError(THREELC_EINVAL) naming the field that is wrong.
Operation make_operation(Engine& engine, OpKind kind, const threelc_tensor* tensor,
                         const threelc_options* options);

}  // namespace threelc::engine
