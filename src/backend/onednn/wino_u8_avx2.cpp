// AVX2 kernel of wino_u8.hpp: wino_u8_body.hpp with vpmaddwd + vpaddd (the int16 pair products summed into int32, then
// added). Raw pointers and intrinsics only (wino_u8.hpp says why).
#include <immintrin.h>

#include <cstdint>

#include "backend/onednn/wino_u8.hpp"

namespace superpoint_rt::backend::detail {

namespace {

struct Dot {
  // vpmaddwd (16 int16 products summed in pairs) then vpaddd; ymm15 holds the products.
  static void sums(const char* v, long vs, const char* w, long ws, long pairs, std::int32_t acc[96]) {
    const char* v3 = v + 3 * vs;
    asm volatile(
        "vpxor %%ymm0, %%ymm0, %%ymm0\n\t"
        "vpxor %%ymm1, %%ymm1, %%ymm1\n\t"
        "vpxor %%ymm2, %%ymm2, %%ymm2\n\t"
        "vpxor %%ymm3, %%ymm3, %%ymm3\n\t"
        "vpxor %%ymm4, %%ymm4, %%ymm4\n\t"
        "vpxor %%ymm5, %%ymm5, %%ymm5\n\t"
        "vpxor %%ymm6, %%ymm6, %%ymm6\n\t"
        "vpxor %%ymm7, %%ymm7, %%ymm7\n\t"
        "vpxor %%ymm8, %%ymm8, %%ymm8\n\t"
        "vpxor %%ymm9, %%ymm9, %%ymm9\n\t"
        "vpxor %%ymm10, %%ymm10, %%ymm10\n\t"
        "vpxor %%ymm11, %%ymm11, %%ymm11\n\t"
        "1:\n\t"
        "vmovdqu (%[w]), %%ymm12\n\t"
        "vmovdqu 32(%[w]), %%ymm13\n\t"
        "vpbroadcastd (%[v0]), %%ymm14\n\t"
        "vpmaddwd %%ymm12, %%ymm14, %%ymm15\n\t"
        "vpaddd %%ymm15, %%ymm0, %%ymm0\n\t"
        "vpmaddwd %%ymm13, %%ymm14, %%ymm15\n\t"
        "vpaddd %%ymm15, %%ymm1, %%ymm1\n\t"
        "vpbroadcastd (%[v0],%[vs],1), %%ymm14\n\t"
        "vpmaddwd %%ymm12, %%ymm14, %%ymm15\n\t"
        "vpaddd %%ymm15, %%ymm2, %%ymm2\n\t"
        "vpmaddwd %%ymm13, %%ymm14, %%ymm15\n\t"
        "vpaddd %%ymm15, %%ymm3, %%ymm3\n\t"
        "vpbroadcastd (%[v0],%[vs],2), %%ymm14\n\t"
        "vpmaddwd %%ymm12, %%ymm14, %%ymm15\n\t"
        "vpaddd %%ymm15, %%ymm4, %%ymm4\n\t"
        "vpmaddwd %%ymm13, %%ymm14, %%ymm15\n\t"
        "vpaddd %%ymm15, %%ymm5, %%ymm5\n\t"
        "vpbroadcastd (%[v3]), %%ymm14\n\t"
        "vpmaddwd %%ymm12, %%ymm14, %%ymm15\n\t"
        "vpaddd %%ymm15, %%ymm6, %%ymm6\n\t"
        "vpmaddwd %%ymm13, %%ymm14, %%ymm15\n\t"
        "vpaddd %%ymm15, %%ymm7, %%ymm7\n\t"
        "vpbroadcastd (%[v3],%[vs],1), %%ymm14\n\t"
        "vpmaddwd %%ymm12, %%ymm14, %%ymm15\n\t"
        "vpaddd %%ymm15, %%ymm8, %%ymm8\n\t"
        "vpmaddwd %%ymm13, %%ymm14, %%ymm15\n\t"
        "vpaddd %%ymm15, %%ymm9, %%ymm9\n\t"
        "vpbroadcastd (%[v3],%[vs],2), %%ymm14\n\t"
        "vpmaddwd %%ymm12, %%ymm14, %%ymm15\n\t"
        "vpaddd %%ymm15, %%ymm10, %%ymm10\n\t"
        "vpmaddwd %%ymm13, %%ymm14, %%ymm15\n\t"
        "vpaddd %%ymm15, %%ymm11, %%ymm11\n\t"
        "add $4, %[v0]\n\t"
        "add $4, %[v3]\n\t"
        "add %[ws], %[w]\n\t"
        "dec %[n]\n\t"
        "jnz 1b\n\t"
        "vmovdqa %%ymm0, 0(%[acc])\n\t"
        "vmovdqa %%ymm1, 32(%[acc])\n\t"
        "vmovdqa %%ymm2, 64(%[acc])\n\t"
        "vmovdqa %%ymm3, 96(%[acc])\n\t"
        "vmovdqa %%ymm4, 128(%[acc])\n\t"
        "vmovdqa %%ymm5, 160(%[acc])\n\t"
        "vmovdqa %%ymm6, 192(%[acc])\n\t"
        "vmovdqa %%ymm7, 224(%[acc])\n\t"
        "vmovdqa %%ymm8, 256(%[acc])\n\t"
        "vmovdqa %%ymm9, 288(%[acc])\n\t"
        "vmovdqa %%ymm10, 320(%[acc])\n\t"
        "vmovdqa %%ymm11, 352(%[acc])\n\t"
        : [v0] "+r"(v), [v3] "+r"(v3), [w] "+r"(w), [n] "+r"(pairs)
        : [vs] "r"(vs), [ws] "r"(ws), [acc] "r"(acc)
        : "memory", "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
          "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
  }
};

#include "backend/onednn/wino_u8_body.hpp"  // NOLINT(build/include): the body, inside this anonymous namespace

}  // namespace

void wino_u8_rows_avx2(const WinoU8View& k, const WinoU8Rows& r, void* scratch) {
  rows_256(k, r, scratch);
}

}  // namespace superpoint_rt::backend::detail
