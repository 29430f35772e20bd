// Image augmentation built into the pipeline (tensorpack's
// AugmentImageComponent with a few imgaug augmentors). Each datapoint's
// randomness comes from a seed drawn in input order, so results do not
// depend on how many threads augment.
#include <ATen/EmptyTensor.h>
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/flip.h>
#include <ATen/ops/tensor.h>

#include <sstream>
#include <type_traits>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "base/error.hpp"
#include "data/dataflow.hpp"

namespace tpt::data {

namespace {

struct Prepared {
  Augmentor a;
  at::Tensor mean, std;                 // [C, 1, 1] (or scalars) for Normalize
  std::vector<float> fmean, fstd, one;  // the same in float32, and ToFloat's scale
};

std::string shape_of(const at::Tensor &t) {
  std::ostringstream s;
  s << t.sizes();
  return s.str();
}

at::Tensor apply(const Prepared &p, at::Tensor x, Rng &rng) {
  const Augmentor &a = p.a;
  switch (a.kind) {
    case Augmentor::ToFloat: {
      if (x.scalar_type() == at::kByte || (x.scalar_type() == at::kFloat && a.scale != 1.0)) {
        at::Tensor y = float_pixels(x, PixelOp::Multiply, {0.0f}, p.one);
        if (y.defined()) return y;
      }
      x = x.to(at::kFloat);
      return a.scale == 1.0 ? x : x.mul(a.scale);
    }
    case Augmentor::Normalize: {
      if (a.mean.size() > 1 && (x.dim() != 3 || x.size(0) != static_cast<int64_t>(a.mean.size())))
        invalid_argument("augment NORMALIZE: " + std::to_string(a.mean.size()) + " channels given, the image is " +
                         shape_of(x) + " ([C, H, W] expected)");
      // An integer image would wrap around (u8) and lose the fraction: normalise in f32.
      at::Tensor y = float_pixels(x, PixelOp::Divide, p.fmean, p.fstd);
      if (y.defined()) return y;
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

template <PixelOp op, typename In>
void pixel_loop_plain(const In *in, float *out, int64_t begin, int64_t end, float shift, float operand) {
  for (int64_t i = begin; i < end; ++i) {
    const float d = static_cast<float>(in[i]) - shift;
    out[i] = op == PixelOp::Divide ? d / operand : d * operand;
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
#define TPT_PIXELS_AVX2 1
// Eight pixels at a time: the same correctly rounded subtraction and quotient
// (or product) in every lane as the scalar loop, which does the tail.
template <PixelOp op, typename In>
__attribute__((target("avx2"))) void pixel_loop_avx2(const In *in, float *out, int64_t n, float shift,
                                                     float operand) {
  const __m256 s = _mm256_set1_ps(shift), v = _mm256_set1_ps(operand);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 x;
    if constexpr (std::is_same_v<In, uint8_t>)
      x = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(in + i))));
    else
      x = _mm256_loadu_ps(in + i);
    const __m256 d = _mm256_sub_ps(x, s);
    _mm256_storeu_ps(out + i, op == PixelOp::Divide ? _mm256_div_ps(d, v) : _mm256_mul_ps(d, v));
  }
  pixel_loop_plain<op>(in, out, i, n, shift, operand);
}

bool cpu_has_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}
#endif

template <PixelOp op, typename In>
void pixel_loop(const In *in, float *out, int64_t n, float shift, float operand) {
#ifdef TPT_PIXELS_AVX2
  if (cpu_has_avx2()) return pixel_loop_avx2<op>(in, out, n, shift, operand);
#endif
  pixel_loop_plain<op>(in, out, 0, n, shift, operand);
}

template <typename In>
void pixel_loop(const In *in, float *out, int64_t n, PixelOp op, float shift, float operand) {
  if (op == PixelOp::Divide) pixel_loop<PixelOp::Divide>(in, out, n, shift, operand);
  else pixel_loop<PixelOp::Multiply>(in, out, n, shift, operand);
}

}  // namespace

at::Tensor float_pixels(const at::Tensor &x, PixelOp op, const std::vector<float> &shift,
                        const std::vector<float> &operand) {
  const auto c = static_cast<int64_t>(shift.size());
  if (c < 1 || operand.size() != shift.size() || !x.defined() || !x.device().is_cpu() || !x.is_contiguous() ||
      (x.scalar_type() != at::kByte && x.scalar_type() != at::kFloat) || x.requires_grad() ||
      (c > 1 && (x.dim() < 1 || x.size(0) != c)))
    return {};
  // (empty_cpu: the allocation without the dispatcher's work, per image)
  at::Tensor out = at::detail::empty_cpu(x.sizes(), at::kFloat);
  const int64_t plane = x.numel() / c;
  auto *o = out.data_ptr<float>();
  for (int64_t k = 0; k < c; ++k) {
    if (x.scalar_type() == at::kByte)
      pixel_loop(x.data_ptr<uint8_t>() + k * plane, o + k * plane, plane, op, shift[k], operand[k]);
    else
      pixel_loop(x.data_ptr<float>() + k * plane, o + k * plane, plane, op, shift[k], operand[k]);
  }
  return out;
}

DataFlowPtr augment(DataFlowPtr df, size_t index, std::vector<Augmentor> augmentors, int n_threads) {
  if (augmentors.empty()) invalid_argument("no augmentors given");
  if (n_threads < 0) invalid_argument("n_threads must be >= 0, got " + std::to_string(n_threads));
  std::vector<Prepared> prepared;
  for (size_t i = 0; i < augmentors.size(); ++i) {
    const Augmentor &a = augmentors[i];
    const std::string where = "augmentors[" + std::to_string(i) + "]";
    Prepared p{a, {}, {}, {}, {}, {}};
    switch (a.kind) {
      case Augmentor::ToFloat:
        p.one = {static_cast<float>(a.scale)};
        break;
      case Augmentor::Normalize: {
        if (a.mean.empty() || a.mean.size() != a.std.size()) invalid_argument(where + ": NORMALIZE needs n_channels >= 1 means and stds");
        for (double s : a.std)
          if (!(s > 0)) invalid_argument(where + ": NORMALIZE needs standard deviations > 0");
        const int64_t c = static_cast<int64_t>(a.mean.size());
        std::vector<int64_t> shape = c > 1 ? std::vector<int64_t>{c, 1, 1} : std::vector<int64_t>{};
        p.mean = at::tensor(a.mean, at::TensorOptions().dtype(at::kDouble)).reshape(shape);
        p.std = at::tensor(a.std, at::TensorOptions().dtype(at::kDouble)).reshape(shape);
        for (size_t k = 0; k < a.mean.size(); ++k) {
          p.fmean.push_back(static_cast<float>(a.mean[k]));
          p.fstd.push_back(static_cast<float>(a.std[k]));
        }
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
