//! Any ATen operator by name (`tpt_op_call`, `tpt_op_schemas`).
//!
//! Arguments are matched against the operator's schemas as TorchScript does:
//! positionally, then by keyword ([`Arg::named`]); missing arguments take the
//! schema's defaults; an int or double goes where the schema wants a Scalar;
//! one int fills an `int[N]`. Without an overload name, the first overload
//! whose schema accepts the arguments is called ("out" overloads only when
//! named).
//!
//! ```no_run
//! use tptrain::ops::{self, Arg};
//! use tptrain::Tensor;
//!
//! let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2])?;
//! let s = ops::call1("sum", &[Arg::Tensor(&a), Arg::named("dim", Arg::IntList(&[1]))])?;
//! assert_eq!(s.to_vec::<f32>()?, vec![3.0, 7.0]);
//! let [values, indices] = <[_; 2]>::try_from(ops::call("max", None, &[Arg::Tensor(&a), Arg::Int(1)])?).unwrap();
//! # let _ = (values, indices);
//! # Ok::<(), tptrain::Error>(())
//! ```

use crate::binding::Binding;
use crate::common::{call, Code, Error, Result};
use crate::cstr::with_cstr;
use crate::tensor::{DType, Tensor};
use std::ffi::CString;
use std::os::raw::{c_char, c_void};
use std::ptr;
use tptrain_sys as sys;

/// One argument of an operator call. Everything is borrowed for the call.
#[derive(Debug, Clone)]
pub enum Arg<'a> {
    /// None: an optional argument left out explicitly.
    None,
    Tensor(&'a Tensor),
    /// An int, also for Scalar and `int[N]` arguments.
    Int(i64),
    /// A double, also for Scalar arguments.
    Double(f64),
    Bool(bool),
    IntList(&'a [i64]),
    DoubleList(&'a [f64]),
    /// A list of tensors; `None` entries only for `Tensor?[]` arguments (as
    /// `aten::index` takes). [`Arg::tensors`] makes one from `&[&Tensor]`.
    TensorList(&'a [Option<&'a Tensor>]),
    Str(&'a str),
    /// A ScalarType argument (`dtype=`).
    DType(DType),
    /// A keyword argument: the schema's argument name and the value (made by
    /// [`Arg::named`]). Keyword arguments come after the positional ones.
    Named(&'a str, Box<Arg<'a>>),
}

impl<'a> Arg<'a> {
    /// A keyword argument, e.g. `Arg::named("dim", Arg::IntList(&[1]))`.
    pub fn named(name: &'a str, value: Arg<'a>) -> Arg<'a> {
        Arg::Named(name, Box::new(value))
    }

    /// A list of tensors without `None` entries.
    pub fn tensors(tensors: &'a [&'a Tensor]) -> Arg<'a> {
        // SAFETY: Option<&T> has the layout of &T (the null-pointer
        // optimisation is guaranteed), and every entry is Some.
        Arg::TensorList(unsafe {
            std::slice::from_raw_parts(tensors.as_ptr().cast::<Option<&Tensor>>(), tensors.len())
        })
    }
}

impl<'a> From<&'a Tensor> for Arg<'a> {
    fn from(t: &'a Tensor) -> Arg<'a> {
        Arg::Tensor(t)
    }
}
impl From<i64> for Arg<'_> {
    fn from(v: i64) -> Self {
        Arg::Int(v)
    }
}
impl From<f64> for Arg<'_> {
    fn from(v: f64) -> Self {
        Arg::Double(v)
    }
}
impl From<bool> for Arg<'_> {
    fn from(v: bool) -> Self {
        Arg::Bool(v)
    }
}
impl<'a> From<&'a [i64]> for Arg<'a> {
    fn from(v: &'a [i64]) -> Arg<'a> {
        Arg::IntList(v)
    }
}
impl<'a> From<&'a [f64]> for Arg<'a> {
    fn from(v: &'a [f64]) -> Arg<'a> {
        Arg::DoubleList(v)
    }
}
impl<'a> From<&'a str> for Arg<'a> {
    fn from(v: &'a str) -> Arg<'a> {
        Arg::Str(v)
    }
}
impl From<DType> for Arg<'_> {
    fn from(v: DType) -> Self {
        Arg::DType(v)
    }
}

/// The C form of a list of arguments, with the storage its pointers point into.
struct Lowered {
    args: Vec<sys::tpt_arg>,
    _strings: Vec<CString>,
    _lists: Vec<Vec<*const sys::tpt_tensor>>,
}

fn cstring(s: &str, what: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::new(Code::InvalidArgument, format!("{what} contains a NUL byte: {s:?}")))
}

fn lower(args: &[Arg<'_>]) -> Result<Lowered> {
    let mut out = Lowered { args: Vec::with_capacity(args.len()), _strings: Vec::new(), _lists: Vec::new() };
    for (i, arg) in args.iter().enumerate() {
        let mut a = sys::TPT_ARG_ZERO;
        let value = match arg {
            Arg::Named(name, value) => {
                let c = cstring(name, &format!("the name of args[{i}]"))?;
                a.name = c.as_ptr();
                out._strings.push(c);
                if matches!(**value, Arg::Named(..)) {
                    return Err(Error::new(
                        Code::InvalidArgument,
                        format!("args[{i}] ('{name}'): the value of a keyword argument is another keyword argument"),
                    ));
                }
                &**value
            }
            other => other,
        };
        match value {
            Arg::None => a.kind = sys::TPT_ARG_NONE,
            Arg::Tensor(t) => {
                a.kind = sys::TPT_ARG_TENSOR;
                a.tensor = t.as_ptr();
            }
            Arg::Int(v) => {
                a.kind = sys::TPT_ARG_INT;
                a.i = *v;
            }
            Arg::Double(v) => {
                a.kind = sys::TPT_ARG_DOUBLE;
                a.d = *v;
            }
            Arg::Bool(v) => {
                a.kind = sys::TPT_ARG_BOOL;
                a.i = *v as i64;
            }
            Arg::IntList(v) => {
                a.kind = sys::TPT_ARG_INT_LIST;
                a.list = v.as_ptr().cast::<c_void>();
                a.len = v.len();
            }
            Arg::DoubleList(v) => {
                a.kind = sys::TPT_ARG_DOUBLE_LIST;
                a.list = v.as_ptr().cast::<c_void>();
                a.len = v.len();
            }
            Arg::TensorList(v) => {
                let ptrs: Vec<*const sys::tpt_tensor> =
                    v.iter().map(|t| t.map_or(ptr::null(), |t| t.as_ptr())).collect();
                a.kind = sys::TPT_ARG_TENSOR_LIST;
                a.list = ptrs.as_ptr().cast::<c_void>();
                a.len = ptrs.len();
                out._lists.push(ptrs);
            }
            Arg::Str(s) => {
                let c = cstring(s, &format!("the string of args[{i}]"))?;
                a.kind = sys::TPT_ARG_STRING;
                a.list = c.as_ptr().cast::<c_void>();
                out._strings.push(c);
            }
            Arg::DType(d) => {
                a.kind = sys::TPT_ARG_DTYPE;
                a.i = d.to_raw() as i64;
            }
            Arg::Named(..) => unreachable!("rejected above"),
        }
        out.args.push(a);
    }
    Ok(out)
}

/// Calls `tpt_op_call` with room for `capacity` outputs. On success, the
/// outputs; on failure, the error and the number of outputs C said it needs.
fn call_raw(
    op: *const c_char,
    overload: *const c_char,
    args: &Lowered,
    capacity: usize,
) -> std::result::Result<Vec<Option<Tensor>>, (Error, usize)> {
    let mut outs: Vec<*mut sys::tpt_tensor> = vec![ptr::null_mut(); capacity];
    let mut n = 0usize;
    // SAFETY: every pointer in args points into `args` or into tensors the
    // caller borrows for the call; outs has `capacity` slots.
    let st = unsafe {
        sys::tpt_op_call(outs.as_mut_ptr(), capacity, &mut n, op, overload, args.args.as_ptr(), args.args.len())
    };
    // SAFETY: the status is NULL or ours.
    match unsafe { Error::check(st) } {
        // SAFETY: on success the first n slots hold new handles (or NULL for
        // an undefined result) that the caller owns.
        Ok(()) => Ok(outs[..n.min(capacity)].iter().map(|&p| unsafe { Tensor::from_raw(p) }).collect()),
        Err(e) => Err((e, n)),
    }
}

fn call_impl(op: &str, overload: Option<&str>, args: &[Arg<'_>], capacity: usize) -> Result<Vec<Option<Tensor>>> {
    let lowered = lower(args)?;
    with_cstr(op, "op", |op| {
        let with_overload = |ov: *const c_char| match call_raw(op, ov, &lowered, capacity) {
            Ok(v) => Ok(v),
            // Too many results for the first guess: an operator returning a
            // list (split, unbind); it ran, and runs again with room enough.
            Err((_, needed)) if needed > capacity && capacity > 1 => {
                call_raw(op, ov, &lowered, needed).map_err(|(e, _)| e)
            }
            Err((e, _)) => Err(e),
        };
        match overload {
            Some(ov) => with_cstr(ov, "overload", with_overload)?,
            None => with_overload(ptr::null()),
        }
    })?
}

/// Calls operator `op` ("namespace::name"; a bare name means "aten::name")
/// with `overload` ("Tensor", "Scalar", "out", ...; `None` picks the first
/// that fits) and returns its results as tensors: a Tensor result as it is, a
/// tuple or list of tensors as several, a number or bool as a 0-d tensor
/// (f64, i64 or bool) (`tpt_op_call`).
///
/// Unknown operators, wrong argument counts, kinds or names are
/// [`Code::InvalidArgument`] with a message that lists the schemas tried;
/// errors raised by the operator itself are [`Code::Backend`]. An undefined
/// result (rare: some backward operators) is an error here; use
/// [`call_optional`] for those. An operator returning a list of more than 16
/// tensors runs twice (the first run finds out how many there are): mind it
/// for operators with side effects.
///
/// In-place operators (`add_`, `out=` overloads) change a tensor borrowed as
/// `&Tensor`: see [`Tensor`] for what that means across threads.
pub fn call(op: &str, overload: Option<&str>, args: &[Arg<'_>]) -> Result<Vec<Tensor>> {
    let outs = call_impl(op, overload, args, 16)?;
    let n = outs.len();
    outs.into_iter()
        .enumerate()
        .map(|(k, t)| {
            t.ok_or_else(|| {
                Error::new(
                    Code::InvalidArgument,
                    format!("{op}: result {k} of {n} is an undefined tensor (ops::call_optional returns it as None)"),
                )
            })
        })
        .collect()
}

/// [`call`], with undefined results as `None`.
pub fn call_optional(op: &str, overload: Option<&str>, args: &[Arg<'_>]) -> Result<Vec<Option<Tensor>>> {
    call_impl(op, overload, args, 16)
}

/// [`call`] for an operator with exactly one result, picking the first
/// overload that fits. An operator that returns more is refused before it
/// runs when its schema says so.
pub fn call1(op: &str, args: &[Arg<'_>]) -> Result<Tensor> {
    match call_impl(op, None, args, 1)?.pop() {
        Some(Some(t)) => Ok(t),
        Some(None) => Err(Error::new(Code::InvalidArgument, format!("{op}: the result is an undefined tensor"))),
        None => Err(Error::new(Code::InvalidArgument, format!("{op}: the operator returned nothing"))),
    }
}

/// The schemas of an operator, one per line (`tpt_op_schemas`), e.g.
/// `aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor`.
/// [`Code::NotFound`] if there is no such operator (the message suggests
/// similar names).
pub fn schemas(op: &str) -> Result<String> {
    with_cstr(op, "op", |op| {
        let mut buf = vec![0u8; 256];
        loop {
            let mut needed = 0usize;
            // SAFETY: buf has buf.len() bytes.
            let st = unsafe { sys::tpt_op_schemas(buf.as_mut_ptr().cast(), buf.len(), &mut needed, op) };
            match unsafe { Error::check(st) } {
                Ok(()) => return Ok(crate::cstr::from_buf(&buf)),
                Err(_) if needed > buf.len() => buf.resize(needed, 0),
                Err(e) => return Err(e),
            }
        }
    })?
}

macro_rules! comparison {
    ($tensor_method:ident, $scalar_method:ident, $tensor_fn:ident, $scalar_fn:ident, $what:literal) => {
        #[doc = concat!("`self ", $what, " other` element-wise, a bool tensor (`", stringify!($tensor_fn), "`), broadcasting.")]
        pub fn $tensor_method(&self, other: &Tensor) -> Result<Tensor> {
            let mut out = ptr::null_mut();
            call!(sys::$tensor_fn(&mut out, self.as_ptr(), other.as_ptr()))?;
            Tensor::wrap(out)
        }
        #[doc = concat!("`self ", $what, " x` element-wise against a number, a bool tensor (`", stringify!($scalar_fn), "`).")]
        pub fn $scalar_method(&self, x: f64) -> Result<Tensor> {
            let mut out = ptr::null_mut();
            call!(sys::$scalar_fn(&mut out, self.as_ptr(), x))?;
            Tensor::wrap(out)
        }
    };
}

/// Element-wise comparisons (as tch-rs names them: `ge(2.0)` against a
/// number, `ge_tensor(&b)` against a tensor) and `where`.
///
/// ```
/// use tptrain::Tensor;
/// let x = Tensor::from_slice(&[1.0f32, 5.0, 3.0], &[3])?;
/// let big = x.gt(2.0)?;
/// let clipped = Tensor::from_slice(&[2.0f32; 3], &[3])?.where_self(&big, &x)?; // x > 2 ? 2 : x
/// assert_eq!(clipped.to_vec::<f32>()?, vec![1.0, 2.0, 2.0]);
/// # Ok::<(), tptrain::Error>(())
/// ```
impl Tensor {
    comparison!(eq_tensor, eq, tpt_op_eq, tpt_op_eq_scalar, "==");
    comparison!(gt_tensor, gt, tpt_op_gt, tpt_op_gt_scalar, ">");
    comparison!(ge_tensor, ge, tpt_op_ge, tpt_op_ge_scalar, ">=");
    comparison!(lt_tensor, lt, tpt_op_lt, tpt_op_lt_scalar, "<");
    comparison!(le_tensor, le, tpt_op_le, tpt_op_le_scalar, "<=");

    /// `condition ? self : other` element-wise (`tpt_op_where`, tch-rs's
    /// `where_self`): `condition` is a bool tensor, the three broadcast.
    pub fn where_self(&self, condition: &Tensor, other: &Tensor) -> Result<Tensor> {
        let mut out = ptr::null_mut();
        call!(sys::tpt_op_where(&mut out, condition.as_ptr(), self.as_ptr(), other.as_ptr()))?;
        Tensor::wrap(out)
    }
}

/// A few common operators as methods; everything else through [`call`].
impl Tensor {
    /// `self + other` (`aten::add`), broadcasting.
    pub fn add(&self, other: &Tensor) -> Result<Tensor> {
        call1("aten::add", &[Arg::Tensor(self), Arg::Tensor(other)])
    }
    /// `self - other` (`aten::sub`), broadcasting.
    pub fn sub(&self, other: &Tensor) -> Result<Tensor> {
        call1("aten::sub", &[Arg::Tensor(self), Arg::Tensor(other)])
    }
    /// `self * other` elementwise (`aten::mul`), broadcasting.
    pub fn mul(&self, other: &Tensor) -> Result<Tensor> {
        call1("aten::mul", &[Arg::Tensor(self), Arg::Tensor(other)])
    }
    /// `self / other` elementwise (`aten::div`), broadcasting.
    pub fn div(&self, other: &Tensor) -> Result<Tensor> {
        call1("aten::div", &[Arg::Tensor(self), Arg::Tensor(other)])
    }
    /// The sum of all elements, a 0-d tensor (`aten::sum`).
    pub fn sum(&self) -> Result<Tensor> {
        call1("aten::sum", &[Arg::Tensor(self)])
    }
    /// The mean of all elements, a 0-d tensor (`aten::mean`).
    pub fn mean(&self) -> Result<Tensor> {
        call1("aten::mean", &[Arg::Tensor(self)])
    }
    /// The indices of the largest values along `dim` (`aten::argmax`).
    pub fn argmax(&self, dim: i64) -> Result<Tensor> {
        call1("aten::argmax", &[Arg::Tensor(self), Arg::Int(dim)])
    }
    /// `max(self, 0)` elementwise (`aten::relu`).
    pub fn relu(&self) -> Result<Tensor> {
        call1("aten::relu", &[Arg::Tensor(self)])
    }
}
