//! Images (`tptrain::image`): torchvision's make_grid (`image::grid`) on
//! small batches whose every output pixel is known, its errors, and PNG
//! files (`image::write_png`): the signature and header, replacing a file,
//! and the errors.

use std::path::PathBuf;
use tptrain::image::{self, Grid};
use tptrain::{Code, DType, Error, Result, Tensor};

/// Asserts that `result` failed with `code` and a message containing each of `parts`.
fn expect_error<T: std::fmt::Debug>(result: Result<T>, code: Code, parts: &[&str]) {
    let e: Error = result.expect_err("an error");
    assert_eq!(e.code(), code, "{e}");
    for part in parts {
        assert!(e.message().contains(part), "{:?} does not contain {part:?}", e.message());
    }
}

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tpt-rust-image-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Three 1 x 2 x 2 images: values in [0, 1] and two out of it (clamped).
fn three_images() -> Result<Tensor> {
    #[rustfmt::skip]
    let values = [
        0.0f32, 0.25, 0.5, 1.0, // 0, 64, 128, 255
        1.0, 1.0, 0.0, 0.0,     // 255, 255, 0, 0
        -1.0, 2.0, 0.5, 0.25,   // 0, 255, 128, 64
    ];
    Tensor::from_slice(&values, &[3, 1, 2, 2])
}

// ------------------------------------------------------------ grid

#[test]
fn grid_of_three_images_is_exact() -> Result<()> {
    let g = image::grid(&three_images()?, &Grid::new().columns(2).padding(1).range(0.0, 1.0).pad_value(7))?;
    // Two rows of two columns: (2 + 1) x 2 + 1 pixels each way, one channel.
    assert_eq!(g.shape(), vec![7, 7, 1]);
    assert_eq!(g.dtype(), DType::U8);
    #[rustfmt::skip]
    let want: Vec<u8> = vec![
        7, 7,   7,   7, 7,   7,   7,
        7, 0,   64,  7, 255, 255, 7,
        7, 128, 255, 7, 0,   0,   7,
        7, 7,   7,   7, 7,   7,   7,
        // The third image, then an empty slot: padding.
        7, 0,   255, 7, 7,   7,   7,
        7, 128, 64,  7, 7,   7,   7,
        7, 7,   7,   7, 7,   7,   7,
    ];
    assert_eq!(g.to_vec::<u8>()?, want);
    Ok(())
}

#[test]
fn grid_defaults_to_the_images_own_range() -> Result<()> {
    // N x H x W of i64, no padding: one row of min(N, 8) images, the
    // minimum black and the maximum white.
    let images = Tensor::from_slice(&[2i64, 4, 6, 8], &[2, 1, 2])?;
    let g = image::grid(&images, &Grid::new().padding(0))?;
    assert_eq!(g.shape(), vec![1, 4, 1]);
    assert_eq!(g.to_vec::<u8>()?, vec![0, 85, 170, 255]);
    // The default options: 2 pixels of black padding.
    let g = image::grid(&images, &Grid::default())?;
    assert_eq!(g.shape(), vec![1 + 4, 2 * 4 + 2, 1]);
    let pixels = g.to_vec::<u8>()?;
    assert_eq!(&pixels[2 * 10..3 * 10], &[0, 0, 0, 85, 0, 0, 170, 255, 0, 0]);
    assert_eq!(pixels.iter().filter(|&&p| p != 0).count(), 3);
    Ok(())
}

#[test]
fn grid_keeps_the_channels_last() -> Result<()> {
    // One RGB pixel, N x C x H x W, becomes rows x cols x C.
    let rgb = Tensor::from_slice(&[0.0f64, 0.5, 1.0], &[1, 3, 1, 1])?;
    let g = image::grid(&rgb, &Grid::new().padding(1).range(0.0, 1.0).pad_value(255))?;
    assert_eq!(g.shape(), vec![3, 3, 3]);
    let pixels = g.to_vec::<u8>()?;
    assert_eq!(&pixels[12..15], &[0, 128, 255]);
    assert!(pixels[..12].iter().chain(&pixels[15..]).all(|&p| p == 255));
    Ok(())
}

#[test]
fn bad_grids_are_invalid_arguments() -> Result<()> {
    let images = three_images()?;
    expect_error(image::grid(&images, &Grid::new().columns(0)), Code::InvalidArgument, &["columns"]);
    expect_error(image::grid(&images, &Grid::new().columns(usize::MAX)), Code::InvalidArgument, &["columns"]);
    expect_error(image::grid(&images, &Grid::new().padding(5000)), Code::InvalidArgument, &["padding"]);
    expect_error(image::grid(&images, &Grid::new().range(1.0, -1.0)), Code::InvalidArgument, &["range"]);
    expect_error(image::grid(&images, &Grid::new().range(1.0, 1.0)), Code::InvalidArgument, &["range"]);
    expect_error(image::grid(&images, &Grid::new().range(0.0, f64::INFINITY)), Code::InvalidArgument, &["range"]);
    // Wrong ranks and channel counts.
    let flat = Tensor::from_slice(&[0.0f32; 4], &[2, 2])?;
    expect_error(image::grid(&flat, &Grid::new()), Code::InvalidArgument, &["2 dimensions"]);
    let five = Tensor::from_slice(&[0.0f32; 8], &[1, 1, 2, 2, 2])?;
    expect_error(image::grid(&five, &Grid::new()), Code::InvalidArgument, &["5 dimensions"]);
    let two_channels = Tensor::from_slice(&[0.0f32; 8], &[1, 2, 2, 2])?;
    expect_error(image::grid(&two_channels, &Grid::new()), Code::InvalidArgument, &["2 channels"]);
    let empty = Tensor::from_slice::<f32>(&[], &[0, 1, 2, 2])?;
    expect_error(image::grid(&empty, &Grid::new()), Code::InvalidArgument, &["empty"]);
    let booleans = Tensor::from_slice(&[true, false, true, false], &[1, 1, 2, 2])?;
    expect_error(image::grid(&booleans, &Grid::new()), Code::InvalidArgument, &["dtype"]);
    Ok(())
}

// ------------------------------------------------------------ PNG files

/// The PNG file's signature, then its IHDR: width, height, bit depth, colour type.
fn png_header(bytes: &[u8]) -> (u32, u32, u8, u8) {
    assert!(bytes.len() > 33, "{} bytes", bytes.len());
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(&bytes[12..16], b"IHDR");
    let be = |at: usize| u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
    (be(16), be(20), bytes[24], bytes[25])
}

#[test]
fn write_png_writes_a_png_file() -> Result<()> {
    let dir = tempdir("png");
    let path = dir.join("grid.png");
    let g = image::grid(&three_images()?, &Grid::new().columns(2).padding(1))?;
    image::write_png(&g, &path)?;
    // 7 x 7, 8 bits of grey.
    assert_eq!(png_header(&std::fs::read(&path)?), (7, 7, 8, 0));

    // Replacing it: an RGBA float image H x W x C in [0, 255], 3 wide, 2 high.
    let rgba = Tensor::from_vec((0..24).map(|v| v as f32 * 10.0).collect(), &[2, 3, 4])?;
    image::write_png(&rgba, path.as_path())?;
    assert_eq!(png_header(&std::fs::read(&path)?), (3, 2, 8, 6));
    // H x W: grey; nothing is left beside the file.
    let grey = Tensor::from_slice(&[0u8, 255], &[1, 2])?;
    image::write_png(&grey, path.to_str().unwrap())?;
    assert_eq!(png_header(&std::fs::read(&path)?), (2, 1, 8, 0));
    let names: Vec<_> = std::fs::read_dir(&dir)?.map(|e| e.map(|e| e.file_name())).collect::<std::io::Result<_>>()?;
    assert_eq!(names, vec![std::ffi::OsString::from("grid.png")]);
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

#[test]
fn write_png_errors() -> Result<()> {
    let dir = tempdir("png-errors");
    let g = image::grid(&three_images()?, &Grid::new())?;
    // A missing directory: an I/O error naming the file.
    let missing = dir.join("no such dir").join("grid.png");
    expect_error(image::write_png(&g, &missing), Code::Io, &[missing.to_str().unwrap()]);
    // Images of another shape or dtype.
    expect_error(image::write_png(&three_images()?, dir.join("batch.png")), Code::InvalidArgument, &["dimensions"]);
    let two_channels = Tensor::from_slice(&[0u8; 8], &[2, 2, 2])?;
    expect_error(image::write_png(&two_channels, dir.join("two.png")), Code::InvalidArgument, &["channels"]);
    let ints = Tensor::from_slice(&[0i32; 4], &[2, 2])?;
    expect_error(image::write_png(&ints, dir.join("ints.png")), Code::InvalidArgument, &["dtype"]);
    // A path with a NUL byte, refused before the library.
    expect_error(image::write_png(&g, "a\0b.png"), Code::InvalidArgument, &["NUL"]);
    assert_eq!(std::fs::read_dir(&dir)?.count(), 0);
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
