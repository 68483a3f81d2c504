#pragma once
// SwiGLU of the fused gate/up projection: out = bf16(bf16(silu(gate)) * up).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace tandem::cuda {

// gate_up: [T, 2*inter] (gate in columns [0, inter), up in [inter, 2*inter)); out: [T, inter].
// inter % 8 == 0.
void swiglu(const __nv_bfloat16* gate_up, __nv_bfloat16* out, int T, int inter,
            cudaStream_t stream);

}  // namespace tandem::cuda
