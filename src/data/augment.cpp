// Image augmentation built into the pipeline (tensorpack's
// AugmentImageComponent with a few imgaug augmentors). Each datapoint's
// randomness comes from a seed drawn in input order, so results do not
// depend on how many threads augment.
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/flip.h>
#include <ATen/ops/tensor.h>

#include <sstream>

#include "base/error.hpp"
#include "data/dataflow.hpp"

namespace tpt::data {

namespace {

struct Prepared {
  Augmentor a;
  at::Tensor mean, std;  // [C, 1, 1] (or scalars) for Normalize
};

std::string shape_of(const at::Tensor &t) {
  std::ostringstream s;
  s << t.sizes();
  return s.str();
}

at::Tensor apply(const Prepared &p, at::Tensor x, Rng &rng) {
  const Augmentor &a = p.a;
  switch (a.kind) {
    case Augmentor::ToFloat:
      x = x.to(at::kFloat);
      return a.scale == 1.0 ? x : x.mul(a.scale);
    case Augmentor::Normalize: {
      if (a.mean.size() > 1 && (x.dim() != 3 || x.size(0) != static_cast<int64_t>(a.mean.size())))
        invalid_argument("augment NORMALIZE: " + std::to_string(a.mean.size()) + " channels given, the image is " +
                         shape_of(x) + " ([C, H, W] expected)");
      // An integer image would wrap around (u8) and lose the fraction: normalise in f32.
      if (!at::isFloatingType(x.scalar_type())) x = x.to(at::kFloat);
      return x.sub(p.mean.to(x.scalar_type())).div_(p.std.to(x.scalar_type()));
    }
    case Augmentor::RandomCrop: {
      if (a.padding > 0) x = at::constant_pad_nd(x, {a.padding, a.padding, a.padding, a.padding}, 0);
      const int64_t h = x.size(-2), w = x.size(-1);
      if (a.height > h || a.width > w)
        invalid_argument("augment RANDOM_CROP: " + std::to_string(a.height) + "x" + std::to_string(a.width) +
                         " does not fit the (padded) image " + shape_of(x));
      const int64_t top = static_cast<int64_t>(rng.below(static_cast<uint64_t>(h - a.height + 1)));
      const int64_t left = static_cast<int64_t>(rng.below(static_cast<uint64_t>(w - a.width + 1)));
      return x.narrow(-2, top, a.height).narrow(-1, left, a.width);
    }
    case Augmentor::Flip:
      return rng.uniform() < a.probability ? at::flip(x, {-1}) : x;
  }
  return x;
}

}  // namespace

DataFlowPtr augment(DataFlowPtr df, size_t index, std::vector<Augmentor> augmentors, int n_threads) {
  if (augmentors.empty()) invalid_argument("no augmentors given");
  if (n_threads < 0) invalid_argument("n_threads must be >= 0, got " + std::to_string(n_threads));
  std::vector<Prepared> prepared;
  for (size_t i = 0; i < augmentors.size(); ++i) {
    const Augmentor &a = augmentors[i];
    const std::string where = "augmentors[" + std::to_string(i) + "]";
    Prepared p{a, {}, {}};
    switch (a.kind) {
      case Augmentor::ToFloat:
        break;
      case Augmentor::Normalize: {
        if (a.mean.empty() || a.mean.size() != a.std.size()) invalid_argument(where + ": NORMALIZE needs n_channels >= 1 means and stds");
        for (double s : a.std)
          if (!(s > 0)) invalid_argument(where + ": NORMALIZE needs standard deviations > 0");
        const int64_t c = static_cast<int64_t>(a.mean.size());
        std::vector<int64_t> shape = c > 1 ? std::vector<int64_t>{c, 1, 1} : std::vector<int64_t>{};
        p.mean = at::tensor(a.mean, at::TensorOptions().dtype(at::kDouble)).reshape(shape);
        p.std = at::tensor(a.std, at::TensorOptions().dtype(at::kDouble)).reshape(shape);
        break;
      }
      case Augmentor::RandomCrop:
        if (a.height < 1 || a.width < 1 || a.padding < 0)
          invalid_argument(where + ": RANDOM_CROP needs height, width >= 1 and padding >= 0");
        break;
      case Augmentor::Flip:
        if (!(a.probability >= 0 && a.probability <= 1)) invalid_argument(where + ": FLIP needs a probability in [0, 1]");
        break;
      default:
        invalid_argument(where + ": unknown kind " + std::to_string(static_cast<int>(a.kind)));
    }
    prepared.push_back(std::move(p));
  }
  SeededMapFn fn = [index, prepared = std::move(prepared)](Datapoint &dp, uint64_t seed) {
    if (index >= dp.size())
      invalid_argument("AugmentImageComponent: component " + std::to_string(index) + " asked for, the datapoint has " +
                       std::to_string(dp.size()));
    at::Tensor x = dp[index];
    if (x.dim() != 2 && x.dim() != 3)
      invalid_argument("AugmentImageComponent: the image " + shape_of(x) + " is not [C, H, W] or [H, W]");
    Rng rng;
    rng.seed(seed);
    for (const Prepared &p : prepared) x = apply(p, x, rng);
    dp[index] = x;
  };
  if (n_threads == 0) return seeded_map(std::move(df), std::move(fn), "AugmentImageComponent");
  ParallelMapOptions o;
  o.n_threads = n_threads;
  o.ordered = true;
  o.strict = true;
  return parallel_map(std::move(df), std::move(fn), o, "AugmentImageComponent");
}

}  // namespace tpt::data
