//! Any ATen operator from Rust: positional and keyword arguments of every
//! kind, several outputs, list results, schemas, and the errors (code and C
//! message unchanged). The C twin is tests/c/test_ops.c.

use tptrain::ops::{self, Arg};
use tptrain::{Code, DType, Tensor};

fn t(v: &[f32], shape: &[i64]) -> Tensor {
    Tensor::from_slice(v, shape).unwrap()
}

fn f32s(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

#[test]
fn add_and_matmul() {
    let a = t(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let b = t(&[5.0, 6.0, 7.0, 8.0], &[2, 2]);
    let out = ops::call("aten::add", None, &[Arg::Tensor(&a), Arg::Tensor(&b)]).unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(f32s(&out[0]), vec![6.0, 8.0, 10.0, 12.0]);
    // A bare name is aten's; a Scalar from an int; the overload by name.
    let out = ops::call("add", Some("Scalar"), &[Arg::Tensor(&a), Arg::Int(10)]).unwrap();
    assert_eq!(f32s(&out[0]), vec![11.0, 12.0, 13.0, 14.0]);
    let m = ops::call1("aten::matmul", &[Arg::Tensor(&a), Arg::Tensor(&b)]).unwrap();
    assert_eq!(f32s(&m), vec![19.0, 22.0, 43.0, 50.0]);
    assert_eq!(f32s(&m), f32s(&a.matmul(&b).unwrap()));
    // The convenience methods.
    assert_eq!(f32s(&a.add(&b).unwrap()), vec![6.0, 8.0, 10.0, 12.0]);
    assert_eq!(f32s(&b.sub(&a).unwrap()), vec![4.0; 4]);
    assert_eq!(f32s(&a.mul(&b).unwrap()), vec![5.0, 12.0, 21.0, 32.0]);
    assert_eq!(f32s(&b.div(&a).unwrap()), vec![5.0, 3.0, 7.0 / 3.0, 2.0]);
    assert_eq!(a.sum().unwrap().item().unwrap(), 10.0);
    assert_eq!(a.mean().unwrap().item().unwrap(), 2.5);
    assert_eq!(a.argmax(1).unwrap().to_vec::<i64>().unwrap(), vec![1, 1]);
    assert_eq!(f32s(&t(&[-1.0, 2.0], &[2]).relu().unwrap()), vec![0.0, 2.0]);
}

#[test]
fn max_with_two_outputs() {
    let a = t(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let out = ops::call("aten::max", None, &[Arg::Tensor(&a), Arg::Int(1)]).unwrap();
    assert_eq!(out.len(), 2);
    assert_eq!(f32s(&out[0]), vec![2.0, 4.0]);
    assert_eq!(out[1].to_vec::<i64>().unwrap(), vec![1, 1]);
    let [values, indices] = <[Tensor; 2]>::try_from(
        ops::call(
            "max",
            None,
            &[Arg::Tensor(&a), Arg::named("dim", Arg::Int(0)), Arg::named("keepdim", Arg::Bool(true))],
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(values.shape(), vec![1, 2]);
    assert_eq!(f32s(&values), vec![3.0, 4.0]);
    assert_eq!(indices.to_vec::<i64>().unwrap(), vec![1, 1]);
    // Without dim, one output (a 0-d tensor).
    let m = ops::call1("aten::max", &[Arg::Tensor(&a)]).unwrap();
    assert_eq!(m.ndim(), 0);
    assert_eq!(m.item().unwrap(), 4.0);
    // call1 refuses an operator with more outputs before running it.
    let e = ops::call1("aten::max", &[Arg::Tensor(&a), Arg::Int(1)]).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("capacity is 1 but aten::max.dim returns at least 2 outputs"), "{e}");
}

#[test]
fn keyword_arguments_of_every_kind() {
    let a = t(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let s = ops::call1("aten::sum", &[Arg::Tensor(&a), Arg::named("dim", Arg::IntList(&[1]))]).unwrap();
    assert_eq!(f32s(&s), vec![3.0, 7.0]);
    // One int fills int[1]; a bool.
    let s = ops::call1("aten::sum", &[Arg::Tensor(&a), Arg::Int(0), Arg::Bool(true)]).unwrap();
    assert_eq!(s.shape(), vec![1, 2]);
    assert_eq!(f32s(&s), vec![4.0, 6.0]);
    // A dtype by keyword.
    let s = ops::call1("aten::sum", &[Arg::Tensor(&a), Arg::named("dtype", Arg::DType(DType::F64))]).unwrap();
    assert_eq!(s.dtype(), DType::F64);
    assert_eq!(s.to_vec::<f64>().unwrap(), vec![10.0]);
    // Scalars: an int and a double.
    let c = ops::call1(
        "aten::clamp",
        &[Arg::Tensor(&a), Arg::named("min", Arg::Int(2)), Arg::named("max", Arg::Double(3.0))],
    )
    .unwrap();
    assert_eq!(f32s(&c), vec![2.0, 2.0, 3.0, 3.0]);
    // A string.
    let z = t(&[0.0; 4], &[2, 2]);
    let g = ops::call1("aten::gelu", &[Arg::Tensor(&z), Arg::named("approximate", Arg::Str("tanh"))]).unwrap();
    assert_eq!(f32s(&g), vec![0.0; 4]);
    // A double list (upsampling scale factors), None for an optional argument.
    let img = t(&[1.0, 2.0, 3.0, 4.0], &[1, 1, 2, 2]);
    let up = ops::call1(
        "aten::upsample_nearest2d",
        &[Arg::Tensor(&img), Arg::None, Arg::named("scale_factors", Arg::DoubleList(&[2.0, 2.0]))],
    )
    .unwrap();
    assert_eq!(up.shape(), vec![1, 1, 4, 4]);
    // From conversions.
    let s = ops::call1("aten::add", &[(&a).into(), (&a).into(), Arg::named("alpha", 2i64.into())]).unwrap();
    assert_eq!(f32s(&s), vec![3.0, 6.0, 9.0, 12.0]);
}

#[test]
fn tensor_lists_in_and_out() {
    let a = t(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let b = t(&[5.0, 6.0], &[1, 2]);
    let c = ops::call1("aten::cat", &[Arg::tensors(&[&a, &b])]).unwrap();
    assert_eq!(c.shape(), vec![3, 2]);
    assert_eq!(f32s(&c), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    // Tensor?[] takes None entries.
    let idx = Tensor::from_slice(&[1i64, 0], &[2]).unwrap();
    let x = ops::call1("aten::index", &[Arg::Tensor(&a), Arg::TensorList(&[None, Some(&idx)])]).unwrap();
    assert_eq!(f32s(&x), vec![2.0, 1.0, 4.0, 3.0]);
    // A Tensor[] does not.
    let e = ops::call("aten::cat", None, &[Arg::TensorList(&[Some(&a), None])]).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("entry 1 is NULL; only Tensor?[] takes NULL entries"), "{e}");
    // A list result: split, and an unbind with more results than the first guess.
    let v = t(&[3.0, 1.0, 4.0, 1.0, 5.0], &[5]);
    let parts = ops::call("aten::split", None, &[Arg::Tensor(&v), Arg::Int(2)]).unwrap();
    assert_eq!(parts.iter().map(f32s).collect::<Vec<_>>(), vec![vec![3.0, 1.0], vec![4.0, 1.0], vec![5.0]]);
    let rows: Vec<f32> = (0..40).map(|i| i as f32).collect();
    let r = t(&rows, &[40]);
    let each = ops::call("aten::unbind", None, &[Arg::Tensor(&r)]).unwrap();
    assert_eq!(each.len(), 40);
    assert_eq!(each[39].item().unwrap(), 39.0);
}

#[test]
fn numbers_come_back_as_0d_tensors() {
    let a = t(&[1.0, 2.0, 3.0], &[3]);
    let n = ops::call1("aten::size", &[Arg::Tensor(&a), Arg::Int(0)]).unwrap();
    assert_eq!(n.dtype(), DType::I64);
    assert_eq!(n.item().unwrap(), 3.0);
    let same = ops::call1("aten::equal", &[Arg::Tensor(&a), Arg::Tensor(&a)]).unwrap();
    assert_eq!(same.dtype(), DType::Bool);
    assert_eq!(same.item().unwrap(), 1.0);
}

#[test]
fn unknown_operators_and_bad_arguments_are_errors_with_the_c_message() {
    let a = t(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let b = t(&[5.0, 6.0, 7.0, 8.0], &[2, 2]);
    let e = ops::call("aten::relux", None, &[Arg::Tensor(&a)]).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains(": unknown operator 'aten::relux'") && e.message().ends_with(" (tpt_op_call)"), "{e}");
    assert!(e.message().contains("aten::relu"), "{e}"); // a suggestion
    let e = ops::call("nosuchns::thing", None, &[]).unwrap_err();
    assert!(e.message().contains("unknown operator 'nosuchns::thing'"), "{e}");
    let e = ops::call("aten::add", Some("Nope"), &[Arg::Tensor(&a), Arg::Tensor(&b)]).unwrap_err();
    assert!(e.message().contains("operator 'aten::add' has no overload 'Nope'"), "{e}");
    let e = ops::call("aten::relu", None, &[Arg::Tensor(&a), Arg::Tensor(&b)]).unwrap_err();
    assert!(e.message().contains("takes 1 positional argument, got 2"), "{e}");
    let e =
        ops::call("aten::add", None, &[Arg::Tensor(&a), Arg::Tensor(&b), Arg::named("beta", Arg::Int(2))]).unwrap_err();
    assert!(e.message().contains("no argument named 'beta' (args[2])"), "{e}");
    let e = ops::call("aten::add", None, &[Arg::Tensor(&a), Arg::named("other", Arg::Tensor(&b)), Arg::Int(1)])
        .unwrap_err();
    assert!(e.message().contains("args[2] is positional but follows keyword argument args[1]"), "{e}");
    // LibTorch's own errors are backend errors.
    let c = t(&[1.0, 2.0, 3.0], &[3]);
    let e = ops::call("aten::mm", None, &[Arg::Tensor(&a), Arg::Tensor(&c)]).unwrap_err();
    assert_eq!(e.code(), Code::Backend);
    // Caught on the Rust side: NUL bytes, nested keywords.
    let e = ops::call("aten::re\0lu", None, &[Arg::Tensor(&a)]).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    let e = ops::call1("aten::gelu", &[Arg::Tensor(&a), Arg::named("approximate", Arg::Str("ta\0nh"))]).unwrap_err();
    assert!(e.message().contains("contains a NUL byte"), "{e}");
    let e = ops::call1("aten::sum", &[Arg::Tensor(&a), Arg::named("dim", Arg::named("dim", Arg::Int(0)))]).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("another keyword argument"), "{e}");
}

#[test]
fn in_place_and_out_overloads() {
    let a = t(&[1.0, 2.0], &[2]);
    let b = t(&[10.0, 20.0], &[2]);
    let out = t(&[0.0, 0.0], &[2]);
    let r =
        ops::call("aten::add", Some("out"), &[Arg::Tensor(&a), Arg::Tensor(&b), Arg::named("out", Arg::Tensor(&out))])
            .unwrap();
    assert_eq!(f32s(&out), vec![11.0, 22.0]);
    assert_eq!(f32s(&r[0]), vec![11.0, 22.0]);
    ops::call("aten::add_", None, &[Arg::Tensor(&a), Arg::Tensor(&b)]).unwrap();
    assert_eq!(f32s(&a), vec![11.0, 22.0]);
}

#[test]
fn schemas_one_per_line() {
    let s = ops::schemas("aten::add").unwrap();
    assert!(s.lines().count() >= 4, "{s}");
    assert!(s.contains("aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"), "{s}");
    assert!(s.contains("aten::add.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor"), "{s}");
    assert_eq!(ops::schemas("add").unwrap(), s);
    assert_eq!(
        ops::schemas("aten::relu").unwrap(),
        "aten::relu(Tensor self) -> Tensor\naten::relu.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)"
    );
    // Several times what the first buffer (256 bytes) holds.
    let long = ops::schemas("aten::std").unwrap();
    assert!(long.len() > 512, "{}", long.len());
    assert!(long.starts_with("aten::std("), "{long}");
    let e = ops::schemas("aten::conv2dd").unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert!(e.message().contains("no operator 'aten::conv2dd'"), "{e}");
    assert!(e.message().contains("aten::conv2d"), "{e}");
}

#[test]
fn arithmetic_operators_broadcast_and_promote() -> Result<(), tptrain::Error> {
    let x = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let row = t(&[10.0, 20.0, 40.0], &[3]);
    let col = t(&[2.0, 4.0], &[2, 1]);
    assert_eq!(f32s(&(&x + &row)?), vec![11.0, 22.0, 43.0, 14.0, 25.0, 46.0]);
    assert_eq!(f32s(&(&x - &col)?), vec![-1.0, 0.0, 1.0, 0.0, 1.0, 2.0]);
    let outer = (&col * &row)?;
    assert_eq!(outer.shape(), vec![2, 3]);
    assert_eq!(f32s(&outer), vec![20.0, 40.0, 80.0, 40.0, 80.0, 160.0]);
    assert_eq!(f32s(&(&x / &col)?), vec![0.5, 1.0, 1.5, 1.0, 1.25, 1.5]);
    // chained, with numbers: (x * 2 + 1) / 2 - 0.5 == x
    let back = ((((&x * 2.0)? + 1.0)? / 2.0)? - 0.5)?;
    let twice = ((&x + &x)? - &x)?;
    assert_eq!(f32s(&twice), f32s(&x));
    assert_eq!(f32s(&back), f32s(&x));
    let ints = Tensor::from_slice(&[1i64, 2, 3], &[3])?;
    let half = (&ints / 2.0)?;
    assert_eq!(half.dtype(), DType::F32); // true division
    assert_eq!(half.to_vec::<f32>()?, vec![0.5, 1.0, 1.5]);
    assert_eq!((&ints + &ints)?.dtype(), DType::I64);
    let e = (&x + &t(&[1.0, 2.0, 3.0, 4.0], &[4])).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert_eq!(e.message(), "Tensor::add: a is [2, 3] and b is [4]: the shapes do not broadcast (tpt_op_add)");
    Ok(())
}

#[test]
fn comparisons_and_where() -> Result<(), tptrain::Error> {
    let x = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let row = t(&[2.0, 2.0, 5.0], &[3]);
    let bools = |t: &Tensor| t.to_vec::<bool>().unwrap();
    let eq = x.eq_tensor(&row)?;
    assert_eq!(eq.dtype(), DType::Bool);
    assert_eq!(bools(&eq), vec![false, true, false, false, false, false]);
    assert_eq!(bools(&x.gt_tensor(&row)?), vec![false, false, false, true, true, true]);
    assert_eq!(bools(&x.ge_tensor(&row)?), vec![false, true, false, true, true, true]);
    assert_eq!(bools(&x.lt_tensor(&row)?), vec![true, false, true, false, false, false]);
    assert_eq!(bools(&x.le_tensor(&row)?), vec![true, true, true, false, false, false]);
    assert_eq!(bools(&x.eq(3.0)?), vec![false, false, true, false, false, false]);
    assert_eq!(bools(&x.gt(3.0)?), vec![false, false, false, true, true, true]);
    assert_eq!(bools(&x.ge(3.0)?), vec![false, false, true, true, true, true]);
    assert_eq!(bools(&x.lt(3.0)?), vec![true, true, false, false, false, false]);
    let small = x.le(3.0)?;
    assert_eq!(bools(&small), vec![true, true, true, false, false, false]);
    assert_eq!(f32s(&x.where_self(&small, &row)?), vec![1.0, 2.0, 3.0, 2.0, 2.0, 5.0]);
    let e = x.where_self(&x, &row).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("where takes a bool one"), "{e}");
    Ok(())
}
