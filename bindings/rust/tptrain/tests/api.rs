use tptrain::{Code, DType, Determinism, Error, Feature, Float32Precision, Tensor, TensorOptions};

#[test]
fn versions_match_the_sys_crate() {
    assert_eq!(tptrain::version(), tptrain::sys::TPT_VERSION_NUMBER);
    assert_eq!(tptrain::version_string(), "0.1.0");
    assert_eq!(tptrain::abi_version(), tptrain::sys::TPT_ABI_VERSION);
}

#[test]
fn build_info_agrees_with_features() {
    let info = tptrain::build_info();
    assert!(info.starts_with("tptrain 0.1.0"), "{info}");
    assert_eq!(tptrain::has_feature(Feature::Gloo), info.contains("c10d Gloo: yes"));
    assert_eq!(tptrain::has_feature(Feature::Cuda), info.contains("CUDA devices: yes"));
    let _ = tptrain::has_feature(Feature::Nccl);
}

#[test]
fn invalid_argument_comes_back_as_error() {
    let before = tptrain::num_threads().unwrap();
    let e = tptrain::set_num_threads(0).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert_eq!(e.message(), "set_num_threads: num_threads must be >= 1, got 0 (tpt_set_num_threads)");
    assert_eq!(
        e.to_string(),
        "set_num_threads: num_threads must be >= 1, got 0 (tpt_set_num_threads) (TPT_ERR_INVALID_ARGUMENT)"
    );
    tptrain::set_num_threads(1).unwrap();
    assert_eq!(tptrain::num_threads().unwrap(), 1);
    tptrain::set_num_threads(before).unwrap();
}

#[test]
fn determinism_and_float32_precision() {
    // Process-wide; the other tests of this binary run at the same time, so
    // only settings that leave the CPU's numbers as they are (their effect on
    // LibTorch is checked in gtest-cpp, Runtime.*).
    for p in [Float32Precision::Ieee, Float32Precision::Tf32, Float32Precision::default()] {
        tptrain::set_float32_precision(p).unwrap();
    }
    assert_eq!(Determinism::default(), Determinism::Default);
    tptrain::set_determinism(Determinism::default()).unwrap();
}

#[test]
fn libtorch_errors_are_backend_errors() {
    let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap();
    let e = a.matmul(&a).unwrap_err();
    assert_eq!(e.code(), Code::Backend);
    assert!(e.message().starts_with("Tensor::matmul: ") && e.message().ends_with(" (tpt_tensor_matmul)"), "{e}");
    assert!(e.message().contains("cannot be multiplied"), "{e}");
    let e = a.reshape(&[4, 2]).unwrap_err();
    assert_eq!(e.code(), Code::Backend);
    assert!(e.message().contains("shape '[4, 2]' is invalid for input of size 6"), "{e}");
    let opts = TensorOptions { device: Some("gpu7".into()), requires_grad: false };
    let e = Tensor::from_bytes(&[0u8; 4], DType::F32, &[1], &opts).unwrap_err();
    assert_eq!(e.code(), Code::Backend);
}

#[test]
fn bad_sizes_are_invalid_arguments() {
    let e = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[2, 2]).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("nbytes is 12"), "{e}");
    let i = Tensor::from_slice(&[1i32, 2], &[2]).unwrap();
    let e = i.to_vec::<f32>().unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    let e = Tensor::from_bytes(&[0u8; 8], DType::I32, &[2], &TensorOptions { device: None, requires_grad: true })
        .unwrap_err();
    assert!(e.message().contains("requires_grad needs a floating dtype"), "{e}");
    let e = Tensor::from_bytes(
        &[0u8; 4],
        DType::F32,
        &[1],
        &TensorOptions { device: Some("c\0pu".into()), requires_grad: false },
    )
    .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
}

#[test]
fn matmul_values_by_hand() {
    let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap();
    let b = Tensor::from_slice(&[7.0f32, 8.0, 9.0, 10.0, 11.0, 12.0], &[3, 2]).unwrap();
    let c = a.matmul(&b).unwrap();
    assert_eq!(c.shape(), vec![2, 2]);
    assert_eq!(c.to_vec::<f32>().unwrap(), vec![58.0, 64.0, 139.0, 154.0]);
    let r = c.reshape(&[-1]).unwrap();
    assert_eq!(r.shape(), vec![4]);
    assert_eq!(r.ndim(), 1);
}

#[test]
fn every_dtype_round_trips() {
    fn check<T: tptrain::Element + PartialEq + std::fmt::Debug>(v: &[T]) {
        let t = Tensor::from_slice(v, &[v.len() as i64]).unwrap();
        assert_eq!(t.dtype(), T::DTYPE);
        assert_eq!(t.numel(), v.len() as i64);
        assert_eq!(t.to_vec::<T>().unwrap(), v);
    }
    check(&[1.5f32, -2.0]);
    check(&[1.5f64, -2.0, 1e300]);
    check(&[i64::MIN, 0, i64::MAX]);
    check(&[i32::MIN, 7]);
    check(&[0u8, 255]);
    check(&[true, false, true]);
    for d in [DType::F16, DType::BF16] {
        let bytes = [0x00u8, 0x3c, 0x00, 0xc0];
        let t = Tensor::from_bytes(&bytes, d, &[2], &TensorOptions::default()).unwrap();
        assert_eq!(t.dtype(), d);
        assert_eq!(t.to_bytes().unwrap(), bytes);
    }
    let s = Tensor::from_slice(&[4.0f32], &[]).unwrap();
    assert_eq!(s.ndim(), 0);
    let e = Tensor::from_slice::<f32>(&[], &[0, 3]).unwrap();
    assert_eq!(e.to_vec::<f32>().unwrap(), Vec::<f32>::new());
}

#[test]
fn error_round_trips_through_a_c_status() {
    let e = Error::new(Code::Callback, "from the host");
    let st = e.into_raw_status();
    let back = unsafe { Error::check(st) }.unwrap_err();
    assert_eq!(back, e);
    let nul = Error::new(Code::Io, "a\0b").into_raw_status();
    let back = unsafe { Error::check(nul) }.unwrap_err();
    assert_eq!(back.message(), "a\u{FFFD}b");
    assert_eq!(Code::Backend.name(), "TPT_ERR_BACKEND");
    assert_eq!(Code::Other(999).name(), "TPT_UNKNOWN_CODE");
}

#[test]
fn tensors_move_between_threads() {
    let handles: Vec<_> = (0..4)
        .map(|k| {
            std::thread::spawn(move || {
                let a = Tensor::from_slice(&[k as f32; 4], &[2, 2]).unwrap();
                a.matmul(&a).unwrap()
            })
        })
        .collect();
    for (k, h) in handles.into_iter().enumerate() {
        let v = h.join().unwrap().to_vec::<f32>().unwrap();
        assert_eq!(v, vec![2.0 * (k * k) as f32; 4]);
    }
}
