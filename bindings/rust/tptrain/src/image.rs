//! Images: tiling a batch into one picture and writing PNG files (the
//! header's `tpt_image_grid` and `tpt_image_write_png`).
//!
//! [`grid`] is torchvision's `make_grid`: a batch of images as a tower
//! computes them (`N x C x H x W`, or `N x H x W`) becomes one
//! `rows x cols x C` [`U8`](crate::DType::U8) image, ready for
//! [`Context::put_image`](crate::Context::put_image) (and so the
//! [`TensorBoard`](crate::TensorBoard) monitor) or for [`write_png`].
//!
//! ```no_run
//! use tptrain::image::{self, Grid};
//! # fn demo(samples: &tptrain::Tensor) -> tptrain::Result<()> {
//! // A generator's tanh samples, N x 3 x 32 x 32 in [-1, 1]: 8 to a row.
//! let picture = image::grid(samples, &Grid::new().columns(8).range(-1.0, 1.0))?;
//! image::write_png(&picture, "samples.png")?;
//! # Ok(())
//! # }
//! ```

use crate::binding::Binding;
use crate::common::{call, Code, Error, Result};
use crate::cstr::path_to_cstring;
use crate::tensor::Tensor;
use std::path::Path;
use std::ptr;
use tptrain_sys as sys;

/// How [`grid`] tiles a batch of images (`tpt_image_grid_options`;
/// torchvision's `make_grid` arguments). [`Grid::new`] (also `Default`)
/// gives the C defaults: 8 images to a row, 2 pixels of black padding
/// between the images and around them, and the batch's own minimum and
/// maximum drawn black and white.
///
/// ```
/// use tptrain::image::{self, Grid};
/// use tptrain::{DType, Tensor};
///
/// // Two 1 x 2 x 2 images with values in [-1, 1], side by side, one pixel
/// // of dark grey (64) padding.
/// let batch = Tensor::from_slice(&[-1.0f32, 0.0, 0.0, 1.0, 1.0, 1.0, -1.0, -1.0], &[2, 1, 2, 2])?;
/// let picture = image::grid(&batch, &Grid::new().columns(2).padding(1).range(-1.0, 1.0).pad_value(64))?;
/// // (2 + 1) x 1 + 1 rows, (2 + 1) x 2 + 1 columns, one channel.
/// assert_eq!(picture.shape(), vec![4, 7, 1]);
/// assert_eq!(picture.dtype(), DType::U8);
/// let pixels = picture.to_vec::<u8>()?;
/// assert_eq!(&pixels[0..7], &[64; 7]);
/// // The second row: padding, the first rows of both images (-1, 0 and 1,
/// // 1), padding.
/// assert_eq!(&pixels[7..14], &[64, 0, 128, 64, 255, 255, 64]);
/// # Ok::<(), tptrain::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[must_use = "a Grid does nothing until it is given to image::grid"]
pub struct Grid {
    columns: usize,
    padding: usize,
    range: Option<(f64, f64)>,
    pad_value: u8,
}

impl Default for Grid {
    fn default() -> Grid {
        Grid::new()
    }
}

impl Grid {
    /// The C defaults: 8 images to a row, 2 pixels of padding of grey level
    /// 0 (black), and the batch's own range.
    pub fn new() -> Grid {
        let c = sys::TPT_IMAGE_GRID_OPTIONS_INIT;
        Grid { columns: c.columns as usize, padding: c.padding as usize, range: None, pad_value: c.pad_value as u8 }
    }

    /// Images per row (torchvision's `nrow`), at least 1 (0 is a
    /// [`Code::InvalidArgument`] error from [`grid`]); a batch of fewer
    /// images makes one row of as many columns as images. Default 8.
    pub fn columns(mut self, columns: usize) -> Grid {
        self.columns = columns;
        self
    }

    /// Pixels of padding between the images and around them, at most 4096
    /// (more is a [`Code::InvalidArgument`] error from [`grid`]). Default 2.
    pub fn padding(mut self, pixels: usize) -> Grid {
        self.padding = pixels;
        self
    }

    /// The values drawn black (`low`) and white (`high`), linear between and
    /// clamped outside (torchvision's `value_range`), e.g. `(-1.0, 1.0)` for
    /// a tanh generator's samples. Both finite and `low < high`, else
    /// [`grid`] fails with a [`Code::InvalidArgument`] error. Default: the
    /// batch's own minimum and maximum (a batch of one value is all black).
    pub fn range(mut self, low: f64, high: f64) -> Grid {
        self.range = Some((low, high));
        self
    }

    /// The grey level of the padding, 0 (black, the default) to 255
    /// (white); every channel gets it.
    pub fn pad_value(mut self, grey: u8) -> Grid {
        self.pad_value = grey;
        self
    }

    /// The C options.
    fn to_raw(self) -> Result<sys::tpt_image_grid_options> {
        let invalid = |message: String| Error::new(Code::InvalidArgument, message);
        let mut options = sys::TPT_IMAGE_GRID_OPTIONS_INIT;
        options.columns = i32::try_from(self.columns)
            .map_err(|_| invalid(format!("Grid: columns is {}: it must be in [1, 2^31)", self.columns)))?;
        options.padding = i32::try_from(self.padding)
            .map_err(|_| invalid(format!("Grid: padding is {}: it must be in [0, 4096]", self.padding)))?;
        if let Some((low, high)) = self.range {
            // The C library takes low == high as "no range": refuse it here,
            // so that a range given is always the range used.
            if !(low.is_finite() && high.is_finite() && low < high) {
                return Err(invalid(format!("Grid: range is [{low}, {high}]: finite, low < high expected")));
            }
            options.low = low;
            options.high = high;
        }
        options.pad_value = f64::from(self.pad_value);
        Ok(options)
    }
}

/// Tiles a batch of images into one (torchvision's `make_grid`,
/// `tpt_image_grid`), e.g. a generator's samples. `images` is
/// `N x C x H x W` (LibTorch's layout, as a tower computes them; `C` = 1, 3
/// or 4) or `N x H x W` (one channel), of any real dtype, on any device.
/// The values are mapped to [0, 255] as [`Grid::range`] says; the images
/// are laid out row by row, `options.columns` to a row, with the padding
/// between and around them. The result is a new CPU [`U8`](crate::DType::U8)
/// image of `rows x cols x C`, with `rows = (H + padding) x ceil(N /
/// columns) + padding` and `cols = (W + padding) x min(N, columns) +
/// padding`: what [`Context::put_image`](crate::Context::put_image) and
/// [`write_png`] take.
///
/// Other ranks, an empty batch, other channel counts, a boolean or complex
/// dtype, non-finite values with the batch's own range, and bad options are
/// [`Code::InvalidArgument`] errors. `options`: `None` for the defaults
/// ([`Grid::new`]), or a [`Grid`].
///
/// ```
/// use tptrain::image;
/// use tptrain::Tensor;
///
/// // Three 4 x 4 grey images, N x H x W, in the default layout.
/// let batch = Tensor::from_vec((0..48).map(|v| v as f32).collect(), &[3, 4, 4])?;
/// let picture = image::grid(&batch, None)?;
/// assert_eq!(picture.shape(), vec![2 + 6, 2 + 6 * 3, 1]);
/// # Ok::<(), tptrain::Error>(())
/// ```
pub fn grid<'o>(images: &Tensor, options: impl Into<Option<&'o Grid>>) -> Result<Tensor> {
    let raw = options.into().copied().unwrap_or_default().to_raw()?;
    let mut out = ptr::null_mut();
    call!(sys::tpt_image_grid(&mut out, images.as_ptr(), &raw))?;
    Tensor::wrap(out)
}

/// Writes `image` to the PNG file `path`, replacing it
/// (`tpt_image_write_png`). `image` is as
/// [`Context::put_image`](crate::Context::put_image) takes one: `H x W` or
/// `H x W x C` with `C` = 1 (grey), 3 (RGB) or 4 (RGBA), of dtype
/// [`U8`](crate::DType::U8), or floating point in [0, 255] (rounded and
/// clamped), such as [`grid`] makes. The file is written beside `path`
/// and renamed over it, so a reader never sees half an image.
///
/// A file that cannot be written (a missing directory, no permission) is a
/// [`Code::Io`] error naming it; an image of another shape or dtype a
/// [`Code::InvalidArgument`] one.
///
/// ```
/// use tptrain::image;
/// use tptrain::Tensor;
///
/// // A 2 x 2 RGB image: red, green, blue, white.
/// let pixels: Vec<u8> = vec![255, 0, 0, 0, 255, 0, 0, 0, 255, 255, 255, 255];
/// let picture = Tensor::from_vec(pixels, &[2, 2, 3])?;
/// let path = std::env::temp_dir().join(format!("tptrain-doc-{}.png", std::process::id()));
/// image::write_png(&picture, &path)?;
/// assert!(std::fs::read(&path)?.starts_with(b"\x89PNG\r\n\x1a\n"));
/// std::fs::remove_file(&path)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn write_png(image: &Tensor, path: impl AsRef<Path>) -> Result<()> {
    let path = path_to_cstring(path.as_ref(), "path")?;
    call!(sys::tpt_image_write_png(image.as_ptr(), path.as_ptr()))
}
