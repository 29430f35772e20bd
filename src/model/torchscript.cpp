#include "model/torchscript.hpp"

#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/serialization/import.h>

#include <algorithm>
#include <mutex>

#include "core/error.hpp"

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

}  // namespace

std::shared_ptr<Model> load_torchscript(const std::string &path, std::vector<InputSpec> inputs) {
  auto module = std::make_shared<torch::jit::Module>();
  try {
    *module = torch::jit::load(path);
  } catch (const c10::Error &e) {
    fail(TPT_ERR_IO, "cannot load the TorchScript module " + path + ": " + e.what_without_backtrace());
  }
  if (!module->find_method("forward")) invalid_argument("the TorchScript module " + path + " has no forward method");
  auto mu = std::make_shared<std::mutex>();
  TowerFn fn = [module, mu](Tower &tower, const std::vector<at::Tensor> &batch) {
    run_forward(*module, *mu, tower, batch);
  };
  auto model = std::make_shared<Model>(std::move(inputs), std::move(fn), /*prebuilt=*/true);
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

}  // namespace tpt::model
