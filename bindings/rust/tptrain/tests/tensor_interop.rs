//! Tensors that share memory with Rust or other frameworks: from_vec /
//! from_buffer with LibTorch dropping the owner, share, to, item, device,
//! and DLPack both ways. The C twin is tests/c/test_tensor_interop.c.

use std::os::raw::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tptrain::ops::{self, Arg};
use tptrain::{Code, DType, Tensor};

/// A buffer that counts its drops.
struct Counted {
    data: Vec<f32>,
    drops: Arc<AtomicUsize>,
}
impl AsMut<[f32]> for Counted {
    fn as_mut(&mut self) -> &mut [f32] {
        &mut self.data
    }
}
impl Drop for Counted {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}

// The DLPack 0.6 structs (dlpack.h), as a consumer or producer declares them.
#[repr(C)]
struct DLDevice {
    device_type: i32,
    device_id: i32,
}
#[repr(C)]
struct DLDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}
#[repr(C)]
struct DLTensor {
    data: *mut c_void,
    device: DLDevice,
    ndim: i32,
    dtype: DLDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}
#[repr(C)]
struct DLManagedTensor {
    dl_tensor: DLTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}
const KDL_CPU: i32 = 1;
const KDL_INT: u8 = 0;
const KDL_FLOAT: u8 = 2;

#[test]
fn from_buffer_shares_memory_and_drops_the_owner_exactly_once() {
    let drops = Arc::new(AtomicUsize::new(0));
    let owner = Counted { data: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], drops: Arc::clone(&drops) };
    let t = Tensor::from_buffer(owner, &[2, 3]).unwrap();
    assert_eq!(t.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let shared = t.share().unwrap();
    let view = t.reshape(&[6]).unwrap(); // a view keeps the storage alive too
                                         // In place through one handle, seen through the others: one storage.
    ops::call("aten::mul_", None, &[Arg::Tensor(&shared), Arg::Double(10.0)]).unwrap();
    assert_eq!(view.to_vec::<f32>().unwrap()[5], 60.0);
    drop(t);
    drop(shared);
    assert_eq!(drops.load(Ordering::SeqCst), 0);
    // The last handle goes on another thread: the owner is dropped there.
    std::thread::spawn(move || drop(view)).join().unwrap();
    assert_eq!(drops.load(Ordering::SeqCst), 1);

    // A shape that does not fit: refused before anything is handed over,
    // and the owner is dropped (once) by Rust.
    let owner = Counted { data: vec![0.0; 5], drops: Arc::clone(&drops) };
    let e = Tensor::from_buffer(owner, &[2, 3]).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert_eq!(e.message(), "Tensor::from_buffer: shape [2, 3] has 6 elements but the buffer holds 5");
    assert_eq!(drops.load(Ordering::SeqCst), 2);
    let owner = Counted { data: vec![0.0; 5], drops: Arc::clone(&drops) };
    let e = Tensor::from_buffer(owner, &[-1, 5]).unwrap_err();
    assert!(e.message().contains("shape[0] is -1; dimensions must be >= 0"), "{e}");
    assert_eq!(drops.load(Ordering::SeqCst), 3);
    // An array owns its data inline: boxed before the slice is taken.
    let t = Tensor::from_buffer([7i64, 8, 9], &[3]).unwrap();
    assert_eq!(t.to_vec::<i64>().unwrap(), vec![7, 8, 9]);
}

#[test]
fn from_vec_uses_the_vec_in_place() {
    let v: Vec<i32> = (1..=6).collect();
    let data = v.as_ptr();
    let t = Tensor::from_vec(v, &[3, 2]).unwrap();
    assert_eq!(t.dtype(), DType::I32);
    assert_eq!(t.shape(), vec![3, 2]);
    assert_eq!(t.to_vec::<i32>().unwrap(), vec![1, 2, 3, 4, 5, 6]);
    // No copy: DLPack shows the Vec's own buffer.
    let m = t.to_dlpack().unwrap().cast::<DLManagedTensor>();
    unsafe {
        assert_eq!((*m).dl_tensor.data as *const i32, data);
        ((*m).deleter.unwrap())(m);
    }
    let e = Tensor::from_vec(vec![1.0f64; 4], &[5]).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    let empty = Tensor::from_vec(Vec::<f32>::new(), &[0, 4]).unwrap();
    assert_eq!(empty.numel(), 0);
    let scalar = Tensor::from_vec(vec![2.5f64], &[]).unwrap();
    assert_eq!(scalar.item().unwrap(), 2.5);
}

#[test]
fn detach_shares_values_and_handles_are_counted() {
    // Other tests run on other threads of this process (cargo's default):
    // count only this test's own handles, with a margin for theirs.
    let t = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
    let d = t.detach().unwrap();
    assert_eq!(d.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0]);
    assert!(Tensor::live_handles() >= 2);
    drop(d);
    drop(t);
}

#[test]
fn to_item_and_device() {
    let t = Tensor::from_slice(&[1.5f32, -2.25], &[2]).unwrap();
    assert_eq!(t.device(), "cpu");
    let d = t.to_dtype(DType::F64).unwrap();
    assert_eq!(d.dtype(), DType::F64);
    assert_eq!(d.to_vec::<f64>().unwrap(), vec![1.5, -2.25]);
    let c = t.to(Some("cpu"), None).unwrap(); // a copy: changing it leaves t alone
    ops::call("aten::zero_", None, &[Arg::Tensor(&c)]).unwrap();
    assert_eq!(t.to_vec::<f32>().unwrap(), vec![1.5, -2.25]);
    assert_eq!(c.to_vec::<f32>().unwrap(), vec![0.0, 0.0]);
    let i = t.to(Some("cpu"), Some(DType::I64)).unwrap();
    assert_eq!(i.to_vec::<i64>().unwrap(), vec![1, -2]);
    let e = t.to_device("gpu").unwrap_err();
    assert_eq!(e.code(), Code::Backend);
    assert!(e.message().contains("gpu"), "{e}");
    let e = t.to_device("c\0pu").unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    let e = t.item().unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("2 elements"), "{e}");
    let one = Tensor::from_slice(&[-2.25f32], &[1]).unwrap();
    assert_eq!(one.item().unwrap(), -2.25);
    let flag = Tensor::from_slice(&[true], &[]).unwrap();
    assert_eq!(flag.item().unwrap(), 1.0);
}

#[test]
fn share_is_a_second_handle_on_the_same_tensor() {
    let a = Tensor::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
    let b = a.share().unwrap();
    assert_ne!(a.as_ptr(), b.as_ptr());
    ops::call("aten::add_", None, &[Arg::Tensor(&b), Arg::Int(1)]).unwrap();
    assert_eq!(a.to_vec::<f32>().unwrap(), vec![2.0, 3.0]);
    drop(a);
    assert_eq!(b.to_vec::<f32>().unwrap(), vec![2.0, 3.0]);
    // Handles cross threads.
    let back = std::thread::spawn(move || b.sum().unwrap().item().unwrap()).join().unwrap();
    assert_eq!(back, 5.0);
}

#[test]
fn dlpack_round_trip() {
    let t = Tensor::from_slice(&[1i32, 2, 3, 4, 5, 6], &[3, 2]).unwrap();
    let m = t.to_dlpack().unwrap();
    let data = unsafe {
        let dl = &(*m.cast::<DLManagedTensor>()).dl_tensor;
        assert_eq!(dl.ndim, 2);
        assert_eq!(std::slice::from_raw_parts(dl.shape, 2), &[3, 2]);
        assert_eq!((dl.dtype.code, dl.dtype.bits, dl.dtype.lanes), (KDL_INT, 32, 1));
        assert_eq!(dl.device.device_type, KDL_CPU);
        assert_eq!(*dl.data.cast::<i32>().add(5), 6);
        dl.data
    };
    // SAFETY: m came from to_dlpack and is given away here.
    let back = unsafe { Tensor::from_dlpack(m) }.unwrap();
    drop(t);
    assert_eq!(back.to_vec::<i32>().unwrap(), vec![1, 2, 3, 4, 5, 6]);
    let m2 = back.to_dlpack().unwrap().cast::<DLManagedTensor>();
    unsafe {
        assert_eq!((*m2).dl_tensor.data, data); // the same memory all along
        ((*m2).deleter.unwrap())(m2); // the consumer's duty
    }
}

static FOREIGN_DELETED: AtomicUsize = AtomicUsize::new(0);

/// A producer's DLManagedTensor of four f64 (or of `bits`-bit floats).
fn foreign(bits: u8) -> *mut c_void {
    unsafe extern "C" fn deleter(m: *mut DLManagedTensor) {
        let m = unsafe { Box::from_raw(m) };
        drop(unsafe { Box::from_raw(m.dl_tensor.shape) });
        drop(unsafe { Box::from_raw(m.dl_tensor.data.cast::<[f64; 4]>()) });
        FOREIGN_DELETED.fetch_add(1, Ordering::SeqCst);
    }
    let data = Box::into_raw(Box::new([0.0f64, 0.0, 7.5, 0.0])).cast::<c_void>();
    let shape = Box::into_raw(Box::new(4i64));
    let m = DLManagedTensor {
        dl_tensor: DLTensor {
            data,
            device: DLDevice { device_type: KDL_CPU, device_id: 0 },
            ndim: 1,
            dtype: DLDataType { code: KDL_FLOAT, bits, lanes: 1 },
            shape,
            strides: std::ptr::null_mut(),
            byte_offset: 0,
        },
        manager_ctx: std::ptr::null_mut(),
        deleter: Some(deleter),
    };
    Box::into_raw(Box::new(m)).cast()
}

#[test]
fn dlpack_from_a_foreign_producer() {
    let before = FOREIGN_DELETED.load(Ordering::SeqCst);
    // SAFETY: a valid DLManagedTensor, given away.
    let t = unsafe { Tensor::from_dlpack(foreign(64)) }.unwrap();
    assert_eq!(t.dtype(), DType::F64);
    assert_eq!(t.to_vec::<f64>().unwrap(), vec![0.0, 0.0, 7.5, 0.0]);
    assert_eq!(FOREIGN_DELETED.load(Ordering::SeqCst), before);
    drop(t);
    assert_eq!(FOREIGN_DELETED.load(Ordering::SeqCst), before + 1);
    // A dtype LibTorch cannot take: an error, and the producer's deleter still runs.
    let e = unsafe { Tensor::from_dlpack(foreign(24)) }.unwrap_err();
    assert_eq!(e.code(), Code::Backend);
    assert!(e.message().ends_with(" (tpt_tensor_from_dlpack)"), "{e}");
    assert_eq!(FOREIGN_DELETED.load(Ordering::SeqCst), before + 2);
}
