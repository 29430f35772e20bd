#include "model/torchscript.hpp"

#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/csrc/jit/serialization/import.h>
#include <caffe2/serialize/inline_container.h>

#include <algorithm>
#include <cctype>
#include <mutex>
#include <new>
#include <set>
#include <exception>
#include <functional>
#include <cstring>
#include <fstream>
#include <pthread.h>

#include "base/error.hpp"
#include "base/files.hpp"

namespace tpt::model {

namespace {

std::string variable_name(std::string path) {
  std::replace(path.begin(), path.end(), '.', '/');
  return path;
}

// forward(*inputs) -> cost | (cost, Dict[str, Tensor])
void run_forward(torch::jit::Module &module, std::mutex &mu, Tower &tower, const std::vector<at::Tensor> &batch) {
  std::vector<c10::IValue> args(batch.begin(), batch.end());
  c10::IValue result;
  {
    // train()/eval() flags live on the shared module: one forward at a time
    // changes them (towers on several threads will need one module each).
    std::lock_guard<std::mutex> lock(mu);
    module.train(tower.is_training());
    // The graph runs op by op under autograd, as eager PyTorch would: no
    // profiling, specialisation or fusion (this thread only). A LibTorch
    // built with LLVM (Debian 13's 2.6) otherwise compiles fused CPU
    // kernels again and again while the shapes' profile settles, seconds each.
    torch::jit::GraphOptimizerEnabledGuard plain(false);
    result = module.forward(args);
  }
  c10::IValue cost = result;
  if (result.isTuple()) {
    const auto &elems = result.toTupleRef().elements();
    if (elems.empty() || elems.size() > 2)
      invalid_argument("forward must return the cost or (cost, Dict[str, Tensor]); got a tuple of " +
                       std::to_string(elems.size()));
    cost = elems[0];
    if (elems.size() == 2) {
      if (!elems[1].isGenericDict()) invalid_argument("the second result of forward must be a Dict[str, Tensor]");
      for (const auto &kv : elems[1].toGenericDict()) {
        if (!kv.key().isString() || !kv.value().isTensor())
          invalid_argument("the outputs returned by forward must be a Dict[str, Tensor]");
        tower.set_output(kv.key().toStringRef(), kv.value().toTensor());
      }
    }
  }
  if (!cost.isTensor()) invalid_argument("forward must return the cost as a tensor, got " + cost.tagKind());
  tower.set_cost(cost.toTensor());
}

// The forward method's inputs (after self) must take the signature's tensors.
void check_forward(const torch::jit::Module &module, const std::string &what, size_t n_inputs) {
  auto forward = module.find_method("forward");
  if (!forward) invalid_argument(what + " has no forward method");
  const auto &args = forward->function().getSchema().arguments();
  size_t n = args.empty() ? 0 : args.size() - 1, required = 0;
  std::string names;
  for (size_t i = 1; i < args.size(); ++i) {
    if (!args[i].default_value()) required = i;
    names += (i > 1 ? ", " : "") + args[i].name();
  }
  if (n_inputs < required || n_inputs > n)
    invalid_argument(what + ": forward(self" + (names.empty() ? "" : ", ") + names + ") takes " +
                     (required == n ? std::to_string(n) : std::to_string(required) + " to " + std::to_string(n)) +
                     (required == n && n == 1 ? " input" : " inputs") + ", the input signature has " +
                     std::to_string(n_inputs));
  for (size_t i = 1; i <= n_inputs; ++i)
    if (!c10::TensorType::get()->isSubtypeOf(*args[i].type()))
      invalid_argument(what + ": forward's argument '" + args[i].name() + "' is " + args[i].type()->annotation_str() +
                       "; the inputs are tensors");
}

// What both constructors share: the tower function running forward, the
// module's parameters and buffers as variables, the saver.
std::shared_ptr<Model> from_module(std::shared_ptr<torch::jit::Module> module, const std::string &what,
                                   std::vector<InputSpec> inputs) {
  check_forward(*module, what, inputs.size());
  auto mu = std::make_shared<std::mutex>();
  TowerFn fn = [module, mu](Tower &tower, const std::vector<at::Tensor> &batch) {
    run_forward(*module, *mu, tower, batch);
  };
  auto model = std::make_shared<Model>(std::move(inputs), std::move(fn), /*prebuilt=*/true);
  model->own_parameters = true;
  for (const auto &p : module->named_parameters(true)) model->variables().adopt(variable_name(p.name), p.value, true);
  for (const auto &b : module->named_buffers(true)) model->variables().adopt(variable_name(b.name), b.value, false);
  model->saver = [module](const std::string &out) {
    try {
      module->save(out);
    } catch (const c10::Error &e) {
      fail(TPT_ERR_IO, "cannot save the TorchScript module to " + out + ": " + e.what_without_backtrace());
    }
  };
  return model;
}

// Python's keywords and TorchScript's reserved words: not attribute names.
bool reserved(const std::string &name) {
  static const std::set<std::string> words = {
      "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue", "def",
      "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda",
      "nonlocal", "not", "or", "pass", "raise", "return", "try", "while", "with", "yield", "self", "forward",
      "training"};
  return words.count(name) > 0;
}

bool identifier(const std::string &name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

}  // namespace

bool is_torchscript_archive(const pickle::ZipIndex &index) { return index.record_size("constants.pkl") >= 0; }

namespace {

std::shared_ptr<torch::jit::Module> load_checked_module(const pickle::Bytes &bytes, const pickle::ZipIndex &index,
                                                        const std::string &what);

}  // namespace

std::vector<std::pair<std::string, at::Tensor>> torchscript_named_tensors(const pickle::Bytes &bytes,
                                                                          const pickle::ZipIndex &index,
                                                                          const std::string &what) {
  std::shared_ptr<torch::jit::Module> module = load_checked_module(bytes, index, "the TorchScript module " + what);
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto &p : module->named_parameters(true)) out.emplace_back(variable_name(p.name), p.value.detach());
  for (const auto &b : module->named_buffers(true)) out.emplace_back(variable_name(b.name), b.value.detach());
  return out;
}

std::shared_ptr<Model> load_torchscript(const std::string &path, std::vector<InputSpec> inputs) {
  auto bytes = std::make_shared<std::vector<char>>();
  try {
    *bytes = read_file_bytes(path, "the file");
  } catch (const Error &e) {
    fail(TPT_ERR_IO, "cannot load the TorchScript module " + path + ": " + e.what());
  }
  std::string what = "the TorchScript module " + path;
  std::shared_ptr<torch::jit::Module> module;
  try {
    pickle::ZipIndex index = pickle::check_zip(bytes->data(), bytes->size(), what);
    if (!is_torchscript_archive(index))
      invalid_argument(what + " is not a module saved with torch.jit.save (it has no constants.pkl)");
    module = load_checked_module(bytes, index, what);
  } catch (const Error &e) {
    if (e.code() != TPT_ERR_INVALID_ARGUMENT) throw;
    fail(TPT_ERR_IO, std::string("cannot load the TorchScript module: ") + e.what());  // a file that is not a module
  }
  return from_module(std::move(module), what, std::move(inputs));
}

namespace {

// LibTorch's TorchScript parser recurses once per nested bracket and per
// unary operator: source nested tens of thousands deep overflows the stack.
// Brackets are bounded here (a clear error), and the compiler runs on a
// thread of its own with a large stack (reserved, touched only as used) for
// what no simple count can bound.
constexpr int kMaxNesting = 256;
constexpr size_t kMaxSource = 4u << 20;        // 4 MiB of source
constexpr size_t kCompileStack = 512u << 20;   // 512 MiB of address space

void check_source_shape(const std::string &source, const std::string &what = "the TorchScript source") {
  if (source.size() > kMaxSource)
    invalid_argument(what + " has " + std::to_string(source.size()) + " bytes; at most " + std::to_string(kMaxSource));
  int depth = 0, line = 1;
  for (char c : source) {
    if (c == '\n') ++line;
    if (c == '(' || c == '[' || c == '{') {
      if (++depth > kMaxNesting)
        invalid_argument(what + " nests brackets more than " + std::to_string(kMaxNesting) + " deep (line " +
                         std::to_string(line) + ")");
    } else if ((c == ')' || c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
}

// Runs fn on a new thread with a `stack`-byte stack and waits for it; what
// fn throws is thrown here.
void run_on_big_stack(size_t stack, const std::function<void()> &fn) {
  struct Call {
    const std::function<void()> *fn;
    std::exception_ptr error;
  } call{&fn, nullptr};
  pthread_attr_t attr;
  if (pthread_attr_init(&attr) != 0) fail(TPT_ERR_INTERNAL, "cannot start the TorchScript compiler's thread (pthread_attr_init)");
  pthread_attr_setstacksize(&attr, stack);
  pthread_t thread;
  int rc = pthread_create(
      &thread, &attr,
      [](void *p) -> void * {
        auto *c = static_cast<Call *>(p);
        try {
          (*c->fn)();
        } catch (...) {
          c->error = std::current_exception();
        }
        return nullptr;
      },
      &call);
  pthread_attr_destroy(&attr);
  if (rc != 0)
    fail(TPT_ERR_INTERNAL, "cannot start the TorchScript compiler's thread with a " + std::to_string(stack >> 20) +
                               " MiB stack: " + std::strerror(rc));
  pthread_join(thread, nullptr);
  if (call.error) std::rethrow_exception(call.error);
}

// A torch.jit.save archive checked as far as LibTorch's loader trusts it:
// every pickle in it (data, constants, debug info) runs on base/pickle.hpp's
// machine first (opcodes, stack, memo, globals, tensors against their
// records), every code file has the shape TorchScript source must have
// (size, bracket nesting), and LibTorch then loads those same bytes, onto the
// CPU, on a thread with the compiler's large stack.
std::shared_ptr<torch::jit::Module> load_checked_module(const pickle::Bytes &bytes, const pickle::ZipIndex &index,
                                                        const std::string &what) {
  auto zip = pickle::open_zip(bytes, what);
  uint64_t budget = bytes->size() + pickle::read_limit();
  auto ends_with = [](const std::string &s, const char *tail) {
    size_t n = std::strlen(tail);
    return s.size() >= n && s.compare(s.size() - n, n, tail) == 0;
  };
  for (const std::string &full : index.names) {
    if (full.compare(0, index.prefix.size(), index.prefix) != 0) continue;  // LibTorch reads only its folder
    std::string name = full.substr(index.prefix.size());
    if (ends_with(name, ".pkl") || ends_with(name, ".debug_pkl")) {
      pickle::Mode mode;
      mode.make_tensors = false;
      mode.objects = true;
      pickle::Pickle checked(*zip, index, name, what, mode, budget);
      budget = checked.budget_left();
    } else if (name.compare(0, 5, "code/") == 0 && ends_with(name, ".py")) {
      at::DataPtr data;
      size_t size = 0;
      try {
        std::tie(data, size) = zip->getRecord(name);
      } catch (const c10::Error &e) {
        std::string m = first_line(e.what_without_backtrace());
        invalid_argument(what + ": its record " + name + " cannot be read (" + m + ")");
      }
      check_source_shape(std::string(static_cast<const char *>(data.get()), size), what + " (" + name + ")");
    }
  }
  auto module = std::make_shared<torch::jit::Module>();
  try {
    run_on_big_stack(kCompileStack,
                     [&] { *module = torch::jit::load(pickle::memory_reader(bytes), c10::Device(c10::kCPU)); });
  } catch (const std::bad_alloc &) {
    throw;
  } catch (const c10::Error &e) {
    std::string m = first_line(e.what_without_backtrace());
    fail(TPT_ERR_IO, "cannot load " + what + ": " + m);
  } catch (const std::exception &e) {  // torch::jit::ErrorReport: the code does not compile
    std::string m = e.what();
    m.erase(0, m.find_first_not_of(" \n"));
    fail(TPT_ERR_IO, "cannot load " + what + ": " + first_line(m));
  }
  return module;
}

}  // namespace

std::shared_ptr<Model> compile_torchscript(const std::string &source, const std::vector<TorchScriptParam> &params,
                                           std::vector<InputSpec> inputs) {
  check_source_shape(source);
  std::set<std::string> seen;
  for (size_t i = 0; i < params.size(); ++i) {
    const TorchScriptParam &p = params[i];
    std::string where = "params[" + std::to_string(i) + "]";
    if (!identifier(p.name)) invalid_argument(where + ".name '" + p.name + "' is not a TorchScript identifier");
    if (reserved(p.name)) invalid_argument(where + ".name '" + p.name + "' is a reserved word");
    if (!seen.insert(p.name).second) invalid_argument(where + ".name '" + p.name + "' is used twice");
    for (int64_t d : p.shape)
      if (d < 1) invalid_argument(where + ".shape " + shape_text(p.shape) + " ('" + p.name + "'): dimensions are >= 1");
    if (p.options.trainable && !c10::isFloatingType(p.options.dtype))
      invalid_argument(where + " ('" + p.name + "') is trainable and needs a floating dtype, got " +
                       c10::toString(p.options.dtype));
  }
  auto module = std::make_shared<torch::jit::Module>("__torch__.TptModule");
  // What scripted nn.Modules have, and what train()/eval() set.
  module->register_attribute("training", c10::BoolType::get(), true);
  for (size_t i = 0; i < params.size(); ++i) {
    const TorchScriptParam &p = params[i];
    at::Tensor value;
    try {
      value = new_variable(p.shape, p.options);
    } catch (const Error &e) {
      invalid_argument("params[" + std::to_string(i) + "] ('" + p.name + "'): " + e.what());
    }
    if (p.options.trainable)
      module->register_parameter(p.name, value, /*is_buffer=*/false);
    else
      module->register_buffer(p.name, value);
  }
  auto compile_error = [](const char *message) {
    std::string text = message;
    text.erase(0, text.find_first_not_of(" \n"));
    invalid_argument("cannot compile the TorchScript source: " + text);
  };
  try {
    run_on_big_stack(kCompileStack, [&] { module->define(source); });
  } catch (const std::bad_alloc &) {
    throw;
  } catch (const c10::Error &e) {
    compile_error(e.what_without_backtrace());
  } catch (const std::exception &e) {  // torch::jit::ErrorReport, with the source's line
    compile_error(e.what());
  }
  return from_module(std::move(module), "the TorchScript source", std::move(inputs));
}

}  // namespace tpt::model
