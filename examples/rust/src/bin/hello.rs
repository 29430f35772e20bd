//! The smallest real tptrain program from Rust (twin of examples/c/hello.c):
//! fit y = a x + b by least squares, the matrix products done by LibTorch.
use tptrain::Tensor;

fn main() -> Result<(), tptrain::Error> {
    println!("{}", tptrain::build_info());
    const N: usize = 8;
    let mut x = Vec::with_capacity(2 * N);
    let mut xt = vec![0.0f32; 2 * N];
    let mut y = Vec::with_capacity(N);
    for i in 0..N {
        let xi = i as f32;
        x.extend_from_slice(&[xi, 1.0]);
        xt[i] = xi;
        xt[N + i] = 1.0;
        y.push(3.0 * xi - 2.0 + if i % 2 == 1 { 0.25 } else { -0.25 });
    }
    let x = Tensor::from_slice(&x, &[N as i64, 2])?;
    let xt = Tensor::from_slice(&xt, &[2, N as i64])?;
    let y = Tensor::from_slice(&y, &[N as i64, 1])?;
    let m = xt.matmul(&x)?.to_vec::<f32>()?;
    let v = xt.matmul(&y)?.to_vec::<f32>()?;
    println!("X^T X = {m:?}\nX^T y = {v:?}");
    let (m, v): (Vec<f64>, Vec<f64>) = (m.iter().map(|&e| e as f64).collect(), v.iter().map(|&e| e as f64).collect());
    let det = m[0] * m[3] - m[1] * m[2];
    let a = (m[3] * v[0] - m[1] * v[1]) / det;
    let b = (m[0] * v[1] - m[2] * v[0]) / det;
    println!("least squares fit: y = {a:.4} * x + {b:.4} (data drawn from y = 3 x - 2)");
    if (a - 3.0).abs() > 0.1 || (b + 2.0).abs() > 0.3 {
        std::process::exit(1);
    }
    Ok(())
}
