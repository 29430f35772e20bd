/*
 * tptrain/image.h: tpt_image: image grids and PNG files (tensorpack's
 * put_image helpers).
 *
 * Part of the C ABI; include <tptrain.h>, which includes every module.
 */
#ifndef TPTRAIN_IMAGE_H
#define TPTRAIN_IMAGE_H

#include "common.h"

TPT_BEGIN_DECL

/* Options of tpt_image_grid (torchvision's make_grid). Initialise with
 * TPT_IMAGE_GRID_OPTIONS_INIT. */
#define TPT_IMAGE_GRID_OPTIONS_VERSION 1
typedef struct tpt_image_grid_options {
  uint32_t version;  /* TPT_IMAGE_GRID_OPTIONS_VERSION */
  int32_t columns;   /* images per row, >= 1; default 8 */
  int32_t padding;   /* pixels between the images and around them, 0 to 4096; default 2 */
  double low, high;  /* the values drawn black and white (linear between, clamped);
                        low == high (default 0, 0): the images' own minimum and maximum */
  double pad_value;  /* the padding's grey level in [0, 255]; default 0 */
} tpt_image_grid_options;
#define TPT_IMAGE_GRID_OPTIONS_INIT { TPT_IMAGE_GRID_OPTIONS_VERSION, 8, 2, 0.0, 0.0, 0.0 }

/* Tiles a batch of images into one (torchvision's make_grid), e.g. a
 * generator's samples: `images` is N x C x H x W (LibTorch's layout, as a
 * tower computes them; C = 1, 3 or 4) or N x H x W, of any real dtype
 * (NaN or infinite values are an error).
 * *out is a uint8 image of rows x cols x C (at most 2^24 pixels a side),
 * ready for tpt_trainer_put_image and tpt_image_write_png. `options` may be
 * NULL. */
TPT_API TPT_NODISCARD tpt_status *tpt_image_grid(tpt_tensor **out, const tpt_tensor *images,
                                                 const tpt_image_grid_options *options);

/* Writes `image` (as tpt_trainer_put_image takes it: H x W or H x W x C with
 * C = 1, 3 or 4; uint8, or floating point in [0, 255]; NaN or infinite
 * values are an error) to the PNG file
 * `path`, replacing it. TPT_ERR_IO naming the file when it cannot be
 * written. */
TPT_API TPT_NODISCARD tpt_status *tpt_image_write_png(const tpt_tensor *image, const char *path);

TPT_END_DECL

#endif /* TPTRAIN_IMAGE_H */
