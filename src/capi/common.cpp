// Versions and tpt_status (include/tptrain/common.h): the C API's common
// module.
#include <cstdlib>
#include <new>

#include "base/error.hpp"
#include "capi/status.hpp"

namespace {
tpt_status g_out_of_memory{TPT_ERR_OUT_OF_MEMORY, "tptrain: out of memory"};
}

namespace tpt::capi {

tpt_status *out_of_memory_status() noexcept { return &g_out_of_memory; }

void throw_null_argument(const char *name) {
  tpt::invalid_argument(std::string("argument '") + name + "' is NULL");
}

void throw_not_live(const char *name, const char *type) {
  tpt::invalid_argument(std::string("argument '") + name + "' is not a live " + type);
}

tpt_status *make_status(tpt_code code, const char *message) noexcept {
  if (code == TPT_OK) return nullptr;
  try {
    return new tpt_status{code, message ? message : ""};
  } catch (...) {
    return &g_out_of_memory;
  }
}

tpt_status *make_status(tpt_code code, const std::string &message) noexcept {
  return make_status(code, message.c_str());
}

}  // namespace tpt::capi

uint32_t tpt_version(void) { return TPT_VERSION_NUMBER; }

const char *tpt_version_string(void) { return TPT_VERSION_STRING; }

uint32_t tpt_abi_version(void) { return TPT_ABI_VERSION; }

tpt_code tpt_status_code(const tpt_status *status) {
  return status ? status->code : TPT_OK;
}

const char *tpt_status_message(const tpt_status *status) {
  return status ? status->message.c_str() : "";
}

void tpt_status_free(tpt_status *status) {
  if (status == nullptr || status == &g_out_of_memory) return;
  delete status;
}

void tpt_strings_free(char **strings, size_t count) {
  if (!strings) return;
  for (size_t i = 0; i < count; ++i) std::free(strings[i]);
  std::free(strings);
}

tpt_status *tpt_status_new(tpt_code code, const char *message) {
  return tpt::capi::make_status(code, message);
}

const char *tpt_code_name(tpt_code code) {
  switch (code) {
    case TPT_OK: return "TPT_OK";
    case TPT_ERR_INVALID_ARGUMENT: return "TPT_ERR_INVALID_ARGUMENT";
    case TPT_ERR_OUT_OF_MEMORY: return "TPT_ERR_OUT_OF_MEMORY";
    case TPT_ERR_BACKEND: return "TPT_ERR_BACKEND";
    case TPT_ERR_INTERNAL: return "TPT_ERR_INTERNAL";
    case TPT_ERR_UNKNOWN: return "TPT_ERR_UNKNOWN";
    case TPT_ERR_CALLBACK: return "TPT_ERR_CALLBACK";
    case TPT_ERR_IO: return "TPT_ERR_IO";
    case TPT_ERR_STATE: return "TPT_ERR_STATE";
    case TPT_ERR_UNSUPPORTED: return "TPT_ERR_UNSUPPORTED";
    case TPT_ERR_NOT_FOUND: return "TPT_ERR_NOT_FOUND";
    case TPT_ERR_TIMEOUT: return "TPT_ERR_TIMEOUT";
    case TPT_STOP: return "TPT_STOP";
    case TPT_CODE_FORCE32: break;
  }
  return "TPT_UNKNOWN_CODE";
}
