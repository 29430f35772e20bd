// Image grids and PNG files (include/tptrain/image.h).
#include <ATen/ops/full.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/zeros_like.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "base/files.hpp"
#include "base/png.hpp"
#include "capi/args.hpp"
#include "capi/trainer_handle.hpp"

using tpt::capi::check_options_version;
using tpt::capi::guard;
using tpt::capi::image_u8;
using tpt::capi::name_arg;
using tpt::capi::require;

namespace tpt::capi {

// An image argument as put_image takes it (H x W, H x W x C or, with
// `batch`, N x H x W x C; C = 1, 3 or 4; uint8 or floating point in
// [0, 255]) as a contiguous CPU uint8 N x H x W x C tensor.
at::Tensor image_u8(const tpt_tensor *image, bool batch) {
  at::Tensor img = tpt::capi::tensor_arg(image, "image");
  const int64_t d = img.dim();
  if (d < 2 || d > (batch ? 4 : 3))
    tpt::invalid_argument("image has " + std::to_string(d) + " dimensions: H x W, H x W x C" +
                          (batch ? " or N x H x W x C" : "") + " expected");
  if (d == 2) img = img.unsqueeze(-1);
  if (img.dim() == 3) img = img.unsqueeze(0);
  const int64_t c = img.size(3);
  if (c != 1 && c != 3 && c != 4)
    tpt::invalid_argument("image has " + std::to_string(c) + " channels in its last dimension: 1, 3 or 4 expected");
  if (img.size(0) < 1 || img.size(1) < 1 || img.size(2) < 1) tpt::invalid_argument("image is empty");
  if (img.scalar_type() == at::kByte) {
  } else if (img.is_floating_point()) {
    img = img.detach().to(at::kCPU, at::kFloat);
    if (!img.isfinite().all().item<bool>()) tpt::invalid_argument("image has values that are NaN or infinite");
    img = img.round().clamp(0, 255).to(at::kByte);
  } else {
    tpt::invalid_argument(std::string("image has dtype ") + c10::toString(img.scalar_type()) +
                          ": uint8, or floating point in [0, 255], expected");
  }
  return img.detach().to(at::kCPU).contiguous();
}

}  // namespace tpt::capi

tpt_status *tpt_image_grid(tpt_tensor **out, const tpt_tensor *images, const tpt_image_grid_options *options) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    at::Tensor x = tpt::capi::tensor_arg(images, "images");
    tpt_image_grid_options o = TPT_IMAGE_GRID_OPTIONS_INIT;
    if (options) {
      check_options_version(options->version, TPT_IMAGE_GRID_OPTIONS_VERSION, "options", "TPT_IMAGE_GRID_OPTIONS_INIT");
      o = *options;
    }
    if (o.columns < 1) tpt::invalid_argument("options->columns is " + std::to_string(o.columns) + ": it must be at least 1");
    if (o.padding < 0 || o.padding > 4096)
      tpt::invalid_argument("options->padding is " + std::to_string(o.padding) + ": it must be in [0, 4096]");
    if (!(o.pad_value >= 0 && o.pad_value <= 255))
      tpt::invalid_argument("options->pad_value is " + std::to_string(o.pad_value) + ": it must be in [0, 255]");
    if (!std::isfinite(o.low) || !std::isfinite(o.high) || o.low > o.high)
      tpt::invalid_argument("options->low and high are " + std::to_string(o.low) + " and " + std::to_string(o.high) +
                            ": finite, low < high (or both equal: the images' own range) expected");
    if (x.dim() == 3) x = x.unsqueeze(1);
    if (x.dim() != 4)
      tpt::invalid_argument("images has " + std::to_string(x.dim()) +
                            " dimensions: N x C x H x W (C = 1, 3 or 4) or N x H x W expected");
    const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
    if (c != 1 && c != 3 && c != 4)
      tpt::invalid_argument("images has " + std::to_string(c) + " channels in dimension 1: 1, 3 or 4 expected");
    if (n < 1 || h < 1 || w < 1) tpt::invalid_argument("images is empty");
    if (x.is_complex() || x.scalar_type() == at::kBool)
      tpt::invalid_argument(std::string("images has dtype ") + c10::toString(x.scalar_type()) + ": a real dtype expected");
    x = x.detach().to(at::kCPU, at::kFloat);
    if (!x.isfinite().all().item<bool>()) tpt::invalid_argument("images has values that are NaN or infinite");
    double lo = o.low, hi = o.high;
    if (lo == hi) {
      lo = x.min().item<double>();
      hi = x.max().item<double>();
    }
    x = hi > lo ? x.sub(lo).div_(hi - lo).clamp_(0, 1).mul_(255) : at::zeros_like(x);
    const int64_t p = o.padding, cols = std::min<int64_t>(o.columns, n), rows = (n + cols - 1) / cols;
    if ((h + p) * rows + p > (1 << 24) || (w + p) * cols + p > (1 << 24))
      tpt::invalid_argument("the grid would be larger than 2^24 pixels on a side");
    at::Tensor grid = at::full({c, (h + p) * rows + p, (w + p) * cols + p}, o.pad_value, at::kFloat);
    for (int64_t i = 0; i < n; ++i)
      grid.narrow(1, (i / cols) * (h + p) + p, h).narrow(2, (i % cols) * (w + p) + p, w).copy_(x[i]);
    // torchvision's save_image: + 0.5, truncated
    tpt::capi::give(out, grid.permute({1, 2, 0}).add(0.5).floor_().clamp_(0, 255).to(at::kByte).contiguous());
  });
}

tpt_status *tpt_image_write_png(const tpt_tensor *image, const char *path) {
  return guard(__func__, [&] {
    std::string file = name_arg(path, "path");
    at::Tensor img = image_u8(image, /*batch=*/false);
    const std::vector<uint8_t> png =
        tpt::encode_png(static_cast<const uint8_t *>(img.data_ptr()), img.size(1), img.size(2), img.size(3));
    // Written beside the file and renamed over it: a reader never sees half
    // an image, and a failed write leaves the old file.
    tpt::write_file_atomic(file, reinterpret_cast<const char *>(png.data()), png.size(), /*sync=*/false);
  });
}
