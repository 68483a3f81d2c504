// libFuzzer target over the safetensors header parser: any bytes must either parse into
// tensors that lie inside the file or raise tandem::Error. Build with clang:
//   cmake -S . -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang \
//         -DTANDEM_FUZZ=ON -DTANDEM_CUDA=OFF -DTANDEM_TESTS=OFF
//   cmake --build build-fuzz --target fuzz_safetensors_header
//   build-fuzz/tests/fuzz/fuzz_safetensors_header -max_total_time=60
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/error.h"
#include "model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    auto h = tandem::model::parse_safetensors_header(bytes, size, "fuzz");
    for (auto& t : h.tensors)
      if (t.begin > t.end || h.data_start + t.end > size) std::abort();
  } catch (const tandem::Error&) {
  }
  return 0;
}
