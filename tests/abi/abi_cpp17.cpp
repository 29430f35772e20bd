// The header compiles alone as C++17 and gives the same layout as from C.
#include "tptrain.h"
#include "abi_layout.h"

static_assert(noexcept(tpt_version()) || true, "");
int main() { return abi_run("C++17"); }
