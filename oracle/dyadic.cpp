#include "oracle/dyadic.h"

#include <cmath>
#include <cstdio>

#include "engine/error.h"

namespace psi::oracle {

Dyadic to_dyadic(Bf16 v, const char* what) {
  if (!v.is_finite()) {
    char msg[96];
    std::snprintf(msg, sizeof msg, "oracle: %s 0x%04x is %s and has no exact value", what, v.bits,
                  v.is_nan() ? "NaN" : "infinite");
    throw Error(msg);
  }
  float f = v.to_float();
  if (f == 0.0f) return {0, 0};
  int ex = 0;
  std::frexp(f, &ex);  // f = fr * 2^ex, 0.5 <= |fr| < 1; 8 significant bits -> fr * 2^8 is an integer
  int e = ex - 8 < kMinExp ? kMinExp : ex - 8;
  return {std::int32_t(std::ldexp(f, -e)), e};
}

}  // namespace psi::oracle
