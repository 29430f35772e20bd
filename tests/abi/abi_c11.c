/* The header compiles alone as C11 (strict flags come from tests/meson.build)
 * and its layout is what the ABI promises. */
#include "tptrain.h"
#include "abi_layout.h"

int main(void) { return abi_run("C11"); }
