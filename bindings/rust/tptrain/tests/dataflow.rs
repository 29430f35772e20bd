//! Dataflows from Rust: sources from closures, iterators and the Source
//! trait; datapoints; batch, map, map_component, parallel_map (ordered,
//! strict, exactly once), prefetch and the other combinators; augmentation
//! that does not depend on the thread count; MNIST; random state saved and
//! restored, with the position of a stateful source mid-pass; errors unchanged and panics resumed or reported; closures
//! dropped exactly once; training from a dataflow (TrainConfig, inputs) with
//! the inference runner. The C twin is tests/c/test_dataflow.c.

use std::cell::RefCell;
use std::collections::HashSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tptrain::nn;
use tptrain::{
    launch_train, Augmentor, Callback, Code, DType, DataFlow, Datapoint, DatapointRef, Error, Events, FakeOptions,
    Flow, InnerState, Input, InputKind, InputOptions, InputSpec, LayerOptions, Model, Optimizer, Order,
    ParallelMapOptions, Progress, Remainder, Result, RunOutcome, Source, StatefulSource, Tensor, TrainConfig, Trainer,
    TrainerOptions,
};

// ------------------------------------------------------------ helpers

fn scalar(v: i64) -> Tensor {
    Tensor::from_slice(&[v], &[]).unwrap()
}

/// The first component of each datapoint of one pass, as i64.
fn pass_values(df: &DataFlow<'_>) -> Vec<i64> {
    df.iter().map(|dp| dp.unwrap()[0].to_vec::<i64>().unwrap()[0]).collect()
}

/// One pass, every component flattened to f32 bytes.
fn pass_bytes(df: &DataFlow<'_>) -> Vec<Vec<Vec<u8>>> {
    df.iter().map(|dp| dp.unwrap().iter().map(|t| t.to_bytes().unwrap()).collect()).collect()
}

/// Rows 0..n as i64 (an [n] tensor).
fn rows(n: i64) -> Tensor {
    Tensor::from_vec((0..n).collect::<Vec<i64>>(), &[n]).unwrap()
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "?".to_owned()
    }
}

/// Counts drops of the closures that capture it.
struct DropGuard(Arc<AtomicUsize>);
impl Drop for DropGuard {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A directory removed when dropped.
struct TempDir(PathBuf);
impl TempDir {
    fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("tptrain-rust-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

// ------------------------------------------------------------ datapoints

#[test]
fn a_datapoint_gets_sets_appends_and_truncates() {
    let mut dp = Datapoint::new().unwrap();
    assert!(dp.is_empty());
    dp.push(&scalar(1)).unwrap();
    dp.set(1, &scalar(2)).unwrap(); // index == len appends
    dp.set(0, &scalar(10)).unwrap();
    assert_eq!(dp.len(), 2);
    assert_eq!(dp.get(0).unwrap().item().unwrap(), 10.0);
    assert_eq!(dp.get(5).unwrap_err().code(), Code::NotFound);
    let e = dp.set(3, &scalar(3)).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("past the end"), "{e}");
    dp.truncate(1).unwrap();
    assert_eq!(dp.len(), 1);
    dp.assign(&[scalar(7), scalar(8), scalar(9)]).unwrap();
    let values: Vec<f64> = dp.tensors().unwrap().iter().map(|t| t.item().unwrap()).collect();
    assert_eq!(values, vec![7.0, 8.0, 9.0]);
    assert!(format!("{dp:?}").starts_with('['));
    let (a, b) = (scalar(1), scalar(2));
    assert_eq!(Datapoint::from_tensors(&[&a, &b]).unwrap().into_tensors().unwrap().len(), 2);
}

// ------------------------------------------------------------ sources

#[test]
fn a_dataflow_from_a_closure_yields_its_passes() {
    let mut i = 0i64;
    let df = DataFlow::from_fn(move || -> Result<_> {
        i += 1;
        // Passes of 3: 1 2 3, end, 5 6 7, end, ...
        Ok(if i % 4 == 0 { None } else { Some(vec![scalar(i), scalar(-i)]) })
    })
    .unwrap();
    assert_eq!(df.size(), None);
    assert_eq!(pass_values(&df), vec![1, 2, 3]);
    assert_eq!(pass_values(&df), vec![5, 6, 7]);
    let mut dp = Datapoint::new().unwrap();
    assert!(df.next_into(&mut dp).unwrap());
    assert_eq!(dp.len(), 2);
    assert_eq!(dp.get(1).unwrap().item().unwrap(), -9.0);
}

#[test]
fn a_dataflow_from_an_iterator_starts_a_new_one_each_pass() {
    let made = Arc::new(AtomicUsize::new(0));
    let m = Arc::clone(&made);
    let df = DataFlow::from_iter(move || {
        m.fetch_add(1, Ordering::SeqCst);
        (0..4).map(|i| vec![scalar(i)])
    })
    .unwrap();
    assert_eq!(pass_values(&df), vec![0, 1, 2, 3]);
    assert_eq!(pass_values(&df), vec![0, 1, 2, 3]);
    // An iteration stopped half-way and a reset: the next pass starts over.
    assert_eq!(df.iter().take(2).count(), 2);
    df.reset_state().unwrap();
    assert_eq!(pass_values(&df), vec![0, 1, 2, 3]);
    assert_eq!(made.load(Ordering::SeqCst), 4);
    // (for ... in &df) is one pass too.
    let mut n = 0;
    for dp in &df {
        n += dp.unwrap().len();
    }
    assert_eq!(n, 4);
}

/// A source with a size and seeded randomness.
struct Seeded {
    seeds: Arc<Mutex<Vec<u64>>>,
    pos: i64,
    value: i64,
}

impl Source for Seeded {
    fn next(&mut self) -> Result<Option<Vec<Tensor>>> {
        if self.pos == 4 {
            self.pos = 0;
            return Ok(None);
        }
        self.pos += 1;
        Ok(Some(vec![scalar(self.value + self.pos)]))
    }
    fn reset(&mut self, seed: u64) -> Result<()> {
        self.seeds.lock().unwrap().push(seed);
        self.value = (seed % 1000) as i64 * 10;
        self.pos = 0;
        Ok(())
    }
    fn size(&self) -> Option<i64> {
        Some(4)
    }
}

#[test]
fn a_source_is_reset_with_its_seed_and_knows_its_size() {
    let seeds = Arc::new(Mutex::new(Vec::new()));
    let make = || DataFlow::from_source(Seeded { seeds: Arc::clone(&seeds), pos: 0, value: 0 }).unwrap();
    let (a, b) = (make(), make());
    assert_eq!(a.size(), Some(4));
    a.set_seed(42).unwrap();
    b.set_seed(42).unwrap();
    let pass_a = pass_values(&a); // iterating resets a dataflow that never was
    let pass_b = pass_values(&b);
    assert_eq!(pass_a, pass_b);
    assert_eq!(pass_a.len(), 4);
    b.set_seed(43).unwrap();
    b.reset_state().unwrap();
    let seen = seeds.lock().unwrap().clone();
    assert_eq!(seen.len(), 3);
    assert_eq!(seen[0], seen[1]);
    assert_ne!(seen[1], seen[2]);
    // The size passes through size-keeping combinators.
    assert_eq!(a.batch(2, Remainder::Drop).unwrap().size(), Some(2));
}

#[test]
fn in_memory_fake_and_file_sources() {
    let x = Tensor::from_slice(&[0f32, 1., 2., 3., 4., 5.], &[3, 2]).unwrap();
    let y = rows(3);
    let df = DataFlow::from_tensors(&[&x, &y], Order::Sequential).unwrap();
    assert_eq!(df.size(), Some(3));
    let first = df.iter().next().unwrap().unwrap();
    assert_eq!(first[0].to_vec::<f32>().unwrap(), vec![0., 1.]);
    assert_eq!(first[1].shape(), Vec::<i64>::new());
    // Rows with different counts are refused.
    let e = DataFlow::from_tensors(&[&x, &rows(4)], Order::Sequential).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);

    let fake = DataFlow::fake(
        &[InputSpec::new("img", DType::F32, &[2, 3]), InputSpec::new("label", DType::I64, &[])],
        5,
        &FakeOptions::default().range(0.0, 4.0),
    )
    .unwrap();
    assert_eq!(fake.size(), Some(5));
    let pass: Vec<Vec<Tensor>> = fake.iter().map(|d| d.unwrap()).collect();
    assert_eq!(pass.len(), 5);
    assert_eq!(pass[0][0].shape(), vec![2, 3]);
    assert_eq!(pass[0][1].dtype(), DType::I64);
    assert!(pass[0][1].item().unwrap() < 4.0);

    // Files decoded by a closure, on the iterating thread and on 2 threads.
    let dir = TempDir::new("files");
    let paths: Vec<PathBuf> = (0..6).map(|i| dir.0.join(format!("f{i}.txt"))).collect();
    for (i, p) in paths.iter().enumerate() {
        std::fs::write(p, format!("{}", i * 11)).unwrap();
    }
    for threads in [0, 2] {
        let df = DataFlow::from_files(&paths, Order::Sequential, threads, |dp, path: &Path, index| {
            let v: i64 = std::fs::read_to_string(path)
                .map_err(|e| Error::new(Code::Io, format!("{}: {e}", path.display())))?
                .parse()
                .map_err(|_| Error::new(Code::InvalidArgument, "not a number"))?;
            dp.push(&scalar(v))?;
            dp.push(&scalar(index as i64))
        })
        .unwrap();
        assert_eq!(df.size(), Some(6));
        assert_eq!(pass_values(&df), vec![0, 11, 22, 33, 44, 55], "n_threads {threads}");
    }
    // A missing file: the decoder's error, unchanged.
    let missing = [dir.0.join("missing.txt")];
    let df = DataFlow::from_files(&missing, Order::Sequential, 0, |_, path: &Path, _| {
        Err(Error::new(Code::Io, format!("cannot read {}", path.file_name().unwrap().to_string_lossy())))
    })
    .unwrap();
    assert_eq!(df.iter().next().unwrap().unwrap_err(), Error::new(Code::Io, "cannot read missing.txt"));
    // IDX: a missing file is named.
    let e = DataFlow::from_idx(&[dir.0.join("nope-idx1-ubyte")], Order::Sequential).unwrap_err();
    assert!(e.message().contains("nope-idx1-ubyte"), "{e}");
}

const FASHION_MNIST: &str = "/usr/share/datasets/fashion-mnist";

#[test]
fn mnist_has_its_sizes_and_shapes() {
    if !Path::new(FASHION_MNIST).join("t10k-images-idx3-ubyte.gz").exists() {
        eprintln!("skipped: {FASHION_MNIST} is missing");
        return;
    }
    let test = DataFlow::mnist(FASHION_MNIST, "test", Order::Sequential).unwrap();
    assert_eq!(test.size(), Some(10_000));
    let first = test.iter().next().unwrap().unwrap();
    assert_eq!((first[0].dtype(), first[0].shape()), (DType::F32, vec![1, 28, 28]));
    assert_eq!((first[1].dtype(), first[1].shape()), (DType::I64, vec![]));
    let pixels = first[0].to_vec::<f32>().unwrap();
    assert!(pixels.iter().all(|p| (0.0..=1.0).contains(p)));
    let train = DataFlow::mnist(FASHION_MNIST, "train", Order::Shuffled).unwrap();
    assert_eq!(train.size(), Some(60_000));
    assert_eq!(train.batch(128, Remainder::Drop).unwrap().size(), Some(468));
    let e = DataFlow::mnist(FASHION_MNIST, "validation", Order::Sequential).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
}

// ------------------------------------------------------------ combinators

#[test]
fn batch_stacks_and_keeps_or_drops_the_remainder() {
    let x = Tensor::from_vec((0..10).map(|v| v as f32).collect::<Vec<f32>>(), &[5, 2]).unwrap();
    let rows5 = rows(5);
    let src = DataFlow::from_tensors(&[&x, &rows5], Order::Sequential).unwrap();
    let batched = src.batch(2, Remainder::Drop).unwrap();
    assert_eq!(batched.size(), Some(2));
    let pass: Vec<Vec<Tensor>> = batched.iter().map(|d| d.unwrap()).collect();
    assert_eq!(pass.len(), 2);
    assert_eq!(pass[0][0].shape(), vec![2, 2]);
    assert_eq!(pass[1][1].to_vec::<i64>().unwrap(), vec![2, 3]);
    let src = DataFlow::from_tensors(&[&rows5], Order::Sequential).unwrap();
    let with_rest = src.batch(2, Remainder::Keep).unwrap();
    assert_eq!(with_rest.size(), Some(3));
    for _pass in 0..2 {
        let shapes: Vec<Vec<i64>> = with_rest.iter().map(|d| d.unwrap()[0].shape()).collect();
        assert_eq!(shapes, vec![vec![2], vec![2], vec![1]]);
    }
    // A dataflow has one consumer.
    let e = src.batch(2, Remainder::Drop).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("one consumer"), "{e}");
    let e = src.iter().next().unwrap().unwrap_err();
    assert!(e.message().contains("one consumer"), "{e}");
    // Shapes that differ are named.
    let ragged = DataFlow::from_iter(|| (1..4).map(|n| vec![rows(n)])).unwrap();
    let e = ragged.batch(2, Remainder::Drop).unwrap().iter().next().unwrap().unwrap_err();
    assert!(e.message().contains('['), "{e}");
}

#[test]
fn map_changes_appends_and_drops() {
    let rows6 = rows(6);
    let df = DataFlow::from_tensors(&[&rows6], Order::Sequential)
        .unwrap()
        .map(|dp| {
            let v = dp.get(0)?.item()? as i64;
            if v % 2 == 1 {
                return dp.clear(); // dropped
            }
            dp.set(0, &scalar(v * 10))?;
            dp.push(&scalar(v + 1))
        })
        .unwrap();
    let pass: Vec<Vec<i64>> =
        df.iter().map(|d| d.unwrap().iter().map(|t| t.item().unwrap() as i64).collect()).collect();
    assert_eq!(pass, vec![vec![0, 1], vec![20, 3], vec![40, 5]]);

    let comp = DataFlow::from_tensors(&[&rows6, &rows6], Order::Sequential)
        .unwrap()
        .map_component(1, |t| -> Result<_> {
            let v = t.item()? as i64;
            Ok(if v == 2 { None } else { Some(scalar(-v)) })
        })
        .unwrap();
    let pass: Vec<Vec<i64>> =
        comp.iter().map(|d| d.unwrap().iter().map(|t| t.item().unwrap() as i64).collect()).collect();
    assert_eq!(pass.len(), 5); // row 2 dropped
    assert_eq!(pass[2], vec![3, -3]);
    let e = DataFlow::from_tensors(&[&rows6], Order::Sequential)
        .unwrap()
        .map_component(4, |t| Ok::<_, Error>(Some(t.share()?)))
        .unwrap()
        .iter()
        .next()
        .unwrap()
        .unwrap_err();
    assert!(e.message().contains("component 4"), "{e}");
}

/// `DatapointRef::seed`: a map closure's seed per datapoint, drawn in input
/// order from the map's seeded generator: the same for the same seed, and
/// for each datapoint whatever the threads of a parallel map. The C twin
/// is test_map_seeds.
#[test]
fn map_closures_get_a_seed_per_datapoint() {
    let rows8 = rows(8);
    let seeds = |threads: usize, seed: u64| -> Vec<u64> {
        let got = Arc::new(Mutex::new(vec![0u64; 8]));
        let g = Arc::clone(&got);
        let f = move |dp: &mut DatapointRef| -> Result<()> {
            let v = dp.get(0)?.item()? as usize;
            g.lock().unwrap()[v] = dp.seed()?;
            Ok(())
        };
        let src = DataFlow::from_tensors(&[&rows8], Order::Sequential).unwrap();
        let df = if threads == 0 {
            src.map(f).unwrap()
        } else {
            let o = ParallelMapOptions { n_threads: threads as i32, buffer_size: 4, ordered: false, strict: true };
            src.parallel_map(&o, f).unwrap()
        };
        df.set_seed(seed).unwrap();
        assert_eq!(pass_values(&df).len(), 8);
        let out = got.lock().unwrap().clone();
        out
    };
    assert_eq!(seeds(0, 7), seeds(0, 7));
    assert_ne!(seeds(0, 7), seeds(0, 8));
    assert_eq!(seeds(1, 7), seeds(3, 7), "the same seeds whatever the threads");
    let mut dp = Datapoint::new().unwrap();
    assert_eq!(dp.seed().unwrap_err().code(), Code::State, "no map, no seed");
    dp.clear().unwrap();
}

#[test]
fn parallel_map_ordered_and_strict_maps_each_datapoint_exactly_once() {
    const N: i64 = 200;
    let calls = Arc::new(Mutex::new(Vec::<i64>::new()));
    let threads = Arc::new(Mutex::new(HashSet::new()));
    let (c, t) = (Arc::clone(&calls), Arc::clone(&threads));
    let main_thread = std::thread::current().id();
    let rows_n = rows(N);
    let options = ParallelMapOptions { n_threads: 4, buffer_size: 16, ordered: true, strict: true };
    let df = DataFlow::from_tensors(&[&rows_n], Order::Sequential)
        .unwrap()
        .parallel_map(&options, move |dp| {
            let v = dp.get(0)?.item()? as i64;
            c.lock().unwrap().push(v);
            t.lock().unwrap().insert(std::thread::current().id());
            dp.set(0, &scalar(v * v))
        })
        .unwrap();
    assert_eq!(df.size(), Some(N));
    for pass in 0..2 {
        let out = pass_values(&df);
        assert_eq!(out, (0..N).map(|v| v * v).collect::<Vec<_>>(), "pass {pass}: in order");
        let mut seen = std::mem::take(&mut *calls.lock().unwrap());
        seen.sort();
        assert_eq!(seen, (0..N).collect::<Vec<_>>(), "pass {pass}: each exactly once");
    }
    let threads = threads.lock().unwrap();
    assert!(!threads.contains(&main_thread));
    assert!(threads.len() > 1, "the map ran on {} thread(s)", threads.len());
}

#[test]
fn prefetch_yields_the_same_passes_from_a_background_thread() {
    let where_ = Arc::new(Mutex::new(HashSet::new()));
    let w = Arc::clone(&where_);
    let df = DataFlow::from_iter(move || {
        w.lock().unwrap().insert(std::thread::current().id());
        (0..20).map(|i| vec![scalar(i)])
    })
    .unwrap()
    .prefetch(4)
    .unwrap();
    for _ in 0..3 {
        assert_eq!(pass_values(&df), (0..20).collect::<Vec<_>>());
    }
    assert!(!where_.lock().unwrap().contains(&std::thread::current().id()));
}

#[test]
fn the_other_combinators() {
    let (a, b) = (rows(3), rows(5));
    let cat = DataFlow::concat(&[
        &DataFlow::from_tensors(&[&a], Order::Sequential).unwrap(),
        &DataFlow::from_tensors(&[&b], Order::Sequential).unwrap(),
    ])
    .unwrap();
    assert_eq!(cat.size(), Some(8));
    assert_eq!(pass_values(&cat), vec![0, 1, 2, 0, 1, 2, 3, 4]);
    let joined = DataFlow::join(&[
        &DataFlow::from_tensors(&[&a], Order::Sequential).unwrap(),
        &DataFlow::from_tensors(&[&b], Order::Sequential).unwrap(),
    ])
    .unwrap()
    .select(&[1, 0, 1])
    .unwrap();
    let pass: Vec<usize> = joined.iter().map(|d| d.unwrap().len()).collect();
    assert_eq!(pass, vec![3, 3, 3]); // ends with the shortest
    let repeated = DataFlow::from_tensors(&[&a], Order::Sequential).unwrap().repeat(Some(2)).unwrap();
    assert_eq!((repeated.size(), pass_values(&repeated)), (Some(6), vec![0, 1, 2, 0, 1, 2]));
    assert_eq!(DataFlow::from_tensors(&[&a], Order::Sequential).unwrap().repeat(None).unwrap().size(), None);
    let fixed = DataFlow::from_tensors(&[&a], Order::Sequential).unwrap().fixed_size(4, InnerState::Keep).unwrap();
    assert_eq!(pass_values(&fixed), vec![0, 1, 2, 0]);
    assert_eq!(pass_values(&fixed), vec![1, 2, 0, 1]); // keep_state: goes on
    let ten = rows(10);
    // A dataflow has one consumer: each shard reads its own source.
    let source = || DataFlow::from_tensors(&[&ten], Order::Sequential).unwrap();
    let (even, odd) = (source().shard(0, 2).unwrap(), source().shard(1, 2).unwrap());
    assert_eq!((even.size(), odd.size()), (Some(5), Some(5)));
    for _ in 0..2 {
        assert_eq!(pass_values(&even), vec![0, 2, 4, 6, 8]);
        assert_eq!(pass_values(&odd), vec![1, 3, 5, 7, 9]);
    }
    let e = source().shard(0, 0).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("count must be from 1 to 2^20"), "{e}");
    let e = source().shard(2, 2).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("index must be from 0 to count - 1"), "{e}");
    let reads = Arc::new(AtomicUsize::new(0));
    let r = Arc::clone(&reads);
    let cached = DataFlow::from_iter(move || {
        r.fetch_add(1, Ordering::SeqCst);
        (0..5).map(|i| vec![scalar(i)])
    })
    .unwrap()
    .cache(Order::Shuffled)
    .unwrap();
    cached.set_seed(3).unwrap();
    let mut p1 = pass_values(&cached);
    let mut p2 = pass_values(&cached);
    assert_eq!(reads.load(Ordering::SeqCst), 1); // read once
    p1.sort();
    p2.sort();
    assert_eq!((p1, p2), ((0..5).collect(), (0..5).collect()));
    let shuffled = DataFlow::from_tensors(&[&b], Order::Sequential).unwrap().local_shuffle(3, 2).unwrap();
    assert_eq!(shuffled.size(), Some(10));
    let mut seen: Vec<i64> = shuffled.iter().take(10).map(|d| d.unwrap()[0].item().unwrap() as i64).collect();
    seen.sort();
    assert!(seen.iter().all(|v| (0..5).contains(v)));
}

/// n grey images [1, 6, 6] u8 with a seeded pattern, and labels.
fn images(n: usize) -> (Tensor, Tensor) {
    let mut s = 0x9E37_79B9_7F4A_7C15u64;
    let pixels: Vec<u8> = (0..n * 36)
        .map(|_| {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            (s.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 56) as u8
        })
        .collect();
    (Tensor::from_vec(pixels, &[n as i64, 1, 6, 6]).unwrap(), rows(n as i64))
}

#[test]
fn augmentation_does_not_depend_on_the_thread_count() {
    let (x, y) = images(40);
    let augmentors = [
        Augmentor::ToFloat { scale: 1.0 / 255.0 },
        Augmentor::Normalize { mean: vec![0.5], std: vec![0.25] },
        Augmentor::RandomCrop { height: 4, width: 4, padding: 1 },
        Augmentor::Flip { probability: 0.5 },
    ];
    let run = |threads: i32, seed: u64| {
        let df = DataFlow::from_tensors(&[&x, &y], Order::Shuffled).unwrap().augment(0, &augmentors, threads).unwrap();
        df.set_seed(seed).unwrap();
        let pass = pass_bytes(&df);
        assert_eq!(pass.len(), 40);
        assert_eq!(pass[0][0].len(), 16 * 4); // 4x4 f32
        pass
    };
    let reference = run(0, 11);
    assert_eq!(run(1, 11), reference);
    assert_eq!(run(3, 11), reference);
    assert_ne!(run(3, 12), reference);
    let e = DataFlow::from_tensors(&[&x], Order::Sequential)
        .unwrap()
        .augment(0, &[Augmentor::Normalize { mean: vec![0.5, 0.5], std: vec![1.0] }], 0)
        .unwrap_err();
    assert!(e.message().contains("mean has 2 values, std 1"), "{e}");
}

// ------------------------------------------------------------ state

#[test]
fn the_random_state_round_trips() {
    let (x, y) = images(12);
    let make = || {
        DataFlow::from_tensors(&[&x, &y], Order::Shuffled)
            .unwrap()
            .augment(0, &[Augmentor::Flip { probability: 0.5 }], 2)
            .unwrap()
            .batch(4, Remainder::Drop)
            .unwrap()
    };
    let a = make();
    a.set_seed(99).unwrap();
    let _first = pass_bytes(&a);
    let state = a.get_state().unwrap();
    assert_eq!(state.dtype(), DType::U8);
    assert_eq!(state.ndim(), 1);
    let later = [pass_bytes(&a), pass_bytes(&a)];

    let b = make();
    b.set_state(&state).unwrap();
    b.reset_state().unwrap();
    assert_eq!([pass_bytes(&b), pass_bytes(&b)], later);
    // Mid-pass, with augmentation threads reading ahead: the restored
    // pipeline goes on with the datapoint after the last one given.
    let mut dp = Datapoint::new().unwrap();
    assert!(a.next_into(&mut dp).unwrap());
    let mid = a.get_state().unwrap();
    let rest = [pass_bytes(&a), pass_bytes(&a)];
    let c = make();
    c.set_seed(1234).unwrap();
    c.set_state(&mid).unwrap();
    c.reset_state().unwrap();
    assert_eq!(rest[0].len(), 2); // 12 rows in batches of 4: one given, two left
    assert_eq!([pass_bytes(&c), pass_bytes(&c)], rest);
    // The state of another pipeline is refused.
    let other = DataFlow::from_tensors(&[&y], Order::Shuffled).unwrap();
    let e = other.set_state(&state).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("not a state of this dataflow"), "{e}");
}

/// splitmix64: the stateful source's own small generator.
fn splitmix(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// What a [`Shuffled`] does when asked for its state.
#[derive(Clone, Copy, PartialEq)]
enum OnSave {
    Save,
    /// Fails once the source is at this position.
    FailAt(usize),
    /// Panics once the source is at this position.
    PanicAt(usize),
}

/// Rows 0..20, each pass in an order drawn by its own generator from the
/// seed given to `reset`; its state is the generator's state at the start
/// of the pass (which the order comes from) and the position in the pass.
struct Shuffled {
    pass_rng: u64,
    order: Vec<i64>,
    pos: usize,
    on_save: OnSave,
}

impl Shuffled {
    const N: usize = 20;
    fn new(on_save: OnSave) -> Shuffled {
        Shuffled { pass_rng: 0, order: Vec::new(), pos: 0, on_save }
    }
    fn draw(&mut self) {
        let mut r = self.pass_rng;
        self.order = (0..Shuffled::N as i64).collect();
        for i in (1..Shuffled::N).rev() {
            self.order.swap(i, (splitmix(&mut r) % (i as u64 + 1)) as usize);
        }
    }
}

impl Source for Shuffled {
    fn next(&mut self) -> Result<Option<Vec<Tensor>>> {
        if self.pos == Shuffled::N {
            self.pos = 0;
            splitmix(&mut self.pass_rng);
            self.draw();
            return Ok(None);
        }
        self.pos += 1;
        Ok(Some(vec![scalar(self.order[self.pos - 1])]))
    }
    fn reset(&mut self, seed: u64) -> Result<()> {
        (self.pass_rng, self.pos) = (seed, 0);
        self.draw();
        Ok(())
    }
    fn size(&self) -> Option<i64> {
        Some(Shuffled::N as i64)
    }
}

impl StatefulSource for Shuffled {
    fn save_state(&self) -> Result<Vec<u8>> {
        match self.on_save {
            OnSave::FailAt(p) if self.pos == p => return Err(Error::new(Code::Io, "the position is lost")),
            OnSave::PanicAt(p) if self.pos == p => panic!("save exploded"),
            _ => {}
        }
        let mut b = self.pass_rng.to_le_bytes().to_vec();
        b.extend_from_slice(&(self.pos as u64).to_le_bytes());
        Ok(b)
    }
    fn restore_state(&mut self, state: &[u8]) -> Result<()> {
        if state.len() != 16 {
            return Err(Error::new(Code::InvalidArgument, format!("a state of {} bytes", state.len())));
        }
        self.pass_rng = u64::from_le_bytes(state[..8].try_into().unwrap());
        self.pos = u64::from_le_bytes(state[8..].try_into().unwrap()) as usize;
        self.draw();
        Ok(())
    }
}

/// A [`Shuffled`] without a position for the pipeline's state.
struct Stateless(Shuffled);

impl Source for Stateless {
    fn next(&mut self) -> Result<Option<Vec<Tensor>>> {
        self.0.next()
    }
    fn reset(&mut self, seed: u64) -> Result<()> {
        self.0.reset(seed)
    }
}

/// The next `n` items of `df`, across passes: a batch's values, or `None`
/// at the end of a pass.
fn take(df: &DataFlow<'_>, n: usize) -> Vec<Option<Vec<i64>>> {
    let mut dp = Datapoint::new().unwrap();
    (0..n).map(|_| df.next_into(&mut dp).unwrap().then(|| dp.get(0).unwrap().to_vec::<i64>().unwrap())).collect()
}

#[test]
fn a_stateful_source_keeps_its_position_in_the_state() {
    // Rows in batches of 3 (the last of a pass has 2): 7 batches a pass.
    type Shape = fn(&DataFlow<'static>) -> DataFlow<'static>;
    let shapes: [(&str, Shape); 3] = [
        ("prefetch then batch", |s| s.prefetch(4).unwrap().batch(3, Remainder::Keep).unwrap()),
        ("batch then prefetch", |s| s.batch(3, Remainder::Keep).unwrap().prefetch(2).unwrap()),
        ("batch", |s| s.batch(3, Remainder::Keep).unwrap()),
    ];
    for (name, shape) in shapes {
        let make = || shape(&DataFlow::from_stateful_source(Shuffled::new(OnSave::Save)).unwrap());
        // The passes are permutations of the rows, different each pass.
        let a = make();
        a.set_seed(7).unwrap();
        let items = take(&a, 16);
        let pass = |i: usize| -> Vec<i64> {
            let mut v: Vec<i64> = items[i * 8..i * 8 + 7].iter().flat_map(|b| b.clone().unwrap()).collect();
            v.sort();
            v
        };
        assert_eq!((items[7].as_ref(), items[15].as_ref()), (None, None), "{name}");
        assert_eq!((pass(0), pass(1)), ((0..20).collect(), (0..20).collect()), "{name}");
        assert_ne!(items[..7], items[8..15], "{name}");

        // k items in (k = 7 is the pass's end, 8 the first of the next).
        for k in [0, 1, 4, 6, 7, 8, 12] {
            let a = make();
            a.set_seed(7).unwrap();
            a.reset_state().unwrap();
            let _ = take(&a, k);
            let state = a.get_state().unwrap();
            assert_eq!((state.dtype(), state.ndim()), (DType::U8, 1));
            let expected = take(&a, 10);

            let b = make();
            b.set_seed(1234).unwrap();
            b.set_state(&state).unwrap();
            b.reset_state().unwrap();
            assert_eq!(take(&b, 10), expected, "{name}, k = {k}");
        }
        // Another seed gives another order: the state is what made B agree.
        let b = make();
        b.set_seed(1234).unwrap();
        assert_ne!(take(&b, 7), items[..7], "{name}");
    }
}

#[test]
fn a_source_that_fails_or_cannot_restore_its_state() {
    // save_state's error comes back from get_state (no thread reads ahead)...
    let want = Error::new(Code::Io, "the position is lost");
    let df =
        DataFlow::from_stateful_source(Shuffled::new(OnSave::FailAt(3))).unwrap().batch(3, Remainder::Keep).unwrap();
    assert_eq!(take(&df, 1).len(), 1);
    assert_eq!(df.get_state().unwrap_err(), want);
    // ... or through the iteration where a prefetch thread saves after
    // every datapoint.
    let df = DataFlow::from_stateful_source(Shuffled::new(OnSave::FailAt(5))).unwrap().prefetch(2).unwrap();
    let pass: Vec<Result<Vec<Tensor>>> = df.iter().collect();
    assert!(pass.len() <= 5, "{} items", pass.len());
    assert_eq!(pass.last().unwrap().as_ref().unwrap_err(), &want);

    // A state with a source's position is refused by a plain source...
    let a = DataFlow::from_stateful_source(Shuffled::new(OnSave::Save)).unwrap().batch(3, Remainder::Keep).unwrap();
    a.set_seed(7).unwrap();
    let _ = take(&a, 2);
    let state = a.get_state().unwrap();
    let plain =
        DataFlow::from_source(Stateless(Shuffled::new(OnSave::Save))).unwrap().batch(3, Remainder::Keep).unwrap();
    let e = plain.set_state(&state).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("cannot restore one"), "{e}");
    // ... whose own state has none: restored, it starts its first pass again
    // with the seed it had, which a stateful source accepts too.
    plain.set_seed(7).unwrap();
    let first = take(&plain, 3);
    let plain_state = plain.get_state().unwrap();
    let again = DataFlow::from_stateful_source(Shuffled::new(OnSave::Save)).unwrap().batch(3, Remainder::Keep).unwrap();
    again.set_state(&plain_state).unwrap();
    again.reset_state().unwrap();
    assert_eq!(take(&again, 3), first);

    // restore_state's error comes back from the reset that restores.
    struct BadRestore(Shuffled);
    impl Source for BadRestore {
        fn next(&mut self) -> Result<Option<Vec<Tensor>>> {
            self.0.next()
        }
    }
    impl StatefulSource for BadRestore {
        fn save_state(&self) -> Result<Vec<u8>> {
            Ok(vec![1, 2, 3])
        }
        fn restore_state(&mut self, state: &[u8]) -> Result<()> {
            self.0.restore_state(state)
        }
    }
    let bad = DataFlow::from_stateful_source(BadRestore(Shuffled::new(OnSave::Save))).unwrap();
    let three_bytes = bad.get_state().unwrap();
    bad.set_state(&three_bytes).unwrap();
    assert_eq!(bad.reset_state().unwrap_err(), Error::new(Code::InvalidArgument, "a state of 3 bytes"));

    // An empty state is a state too.
    struct Empty;
    impl Source for Empty {
        fn next(&mut self) -> Result<Option<Vec<Tensor>>> {
            Ok(None)
        }
    }
    impl StatefulSource for Empty {
        fn save_state(&self) -> Result<Vec<u8>> {
            Ok(Vec::new())
        }
        fn restore_state(&mut self, state: &[u8]) -> Result<()> {
            assert!(state.is_empty());
            Ok(())
        }
    }
    let empty = DataFlow::from_stateful_source(Empty).unwrap();
    let state = empty.get_state().unwrap();
    empty.set_state(&state).unwrap();
    empty.reset_state().unwrap();
    assert_eq!(empty.iter().count(), 0);
}

#[test]
fn a_panic_in_save_state_is_resumed_here_or_becomes_an_error_elsewhere() {
    // On this thread: the panic comes out of get_state.
    let df =
        DataFlow::from_stateful_source(Shuffled::new(OnSave::PanicAt(2))).unwrap().batch(2, Remainder::Drop).unwrap();
    assert_eq!(take(&df, 1).len(), 1);
    let payload = catch_unwind(AssertUnwindSafe(|| df.get_state())).unwrap_err();
    assert_eq!(panic_message(&*payload), "save exploded");
    // On a prefetch thread: an error with the panic's message.
    let df = DataFlow::from_stateful_source(Shuffled::new(OnSave::PanicAt(2))).unwrap().prefetch(2).unwrap();
    let e = df.iter().find_map(|d| d.err()).unwrap();
    assert_eq!(e, Error::new(Code::Callback, "panic in the dataflow source's save_state: save exploded"));
    // Nothing is left pending: a clean pipeline works.
    let df = DataFlow::from_stateful_source(Shuffled::new(OnSave::Save)).unwrap();
    assert_eq!(df.iter().count(), 20);
    assert!(df.get_state().is_ok());
}

// ------------------------------------------------------------ errors, panics, drops

#[test]
fn an_error_from_a_closure_comes_back_unchanged() {
    let rows8 = rows(8);
    let failing = |dp: &mut tptrain::DatapointRef| -> Result<()> {
        if dp.get(0)?.item()? == 5.0 {
            return Err(Error::new(Code::Io, "record 5 is corrupt"));
        }
        Ok(())
    };
    let want = Error::new(Code::Io, "record 5 is corrupt");
    // On this thread.
    let df = DataFlow::from_tensors(&[&rows8], Order::Sequential).unwrap().map(failing).unwrap();
    let pass: Vec<Result<Vec<Tensor>>> = df.iter().collect();
    assert_eq!(pass.len(), 6); // five datapoints, then the error ends the pass
    assert_eq!(pass[5].as_ref().unwrap_err(), &want);
    // On worker threads, and behind a prefetch thread.
    let options = ParallelMapOptions { n_threads: 3, ordered: true, strict: true, ..Default::default() };
    let df = DataFlow::from_tensors(&[&rows8], Order::Sequential).unwrap().parallel_map(&options, failing).unwrap();
    assert_eq!(df.iter().find_map(|d| d.err()), Some(want.clone()));
    let df = DataFlow::from_tensors(&[&rows8], Order::Sequential).unwrap().map(failing).unwrap().prefetch(2).unwrap();
    assert_eq!(df.iter().find_map(|d| d.err()), Some(want.clone()));
    // A source's error.
    let df = DataFlow::from_fn(|| Err(Error::new(Code::NotFound, "no such shard"))).unwrap();
    assert_eq!(df.iter().next().unwrap().unwrap_err(), Error::new(Code::NotFound, "no such shard"));
    // A source that yields a datapoint without components.
    let df = DataFlow::from_fn(|| Ok::<_, Error>(Some(vec![]))).unwrap();
    let e = df.iter().next().unwrap().unwrap_err();
    assert_eq!(e.code(), Code::Callback);
    assert!(e.message().contains("no component"), "{e}");
}

#[test]
fn a_panic_in_a_closure_is_resumed_here_or_becomes_an_error_elsewhere() {
    let rows4 = rows(4);
    let boom = |dp: &mut tptrain::DatapointRef| -> Result<()> {
        if dp.get(0)?.item()? == 2.0 {
            panic!("bad pixel");
        }
        Ok(())
    };
    // On this thread: the panic comes out of the iteration.
    let df = DataFlow::from_tensors(&[&rows4], Order::Sequential).unwrap().map(boom).unwrap();
    let mut it = df.iter();
    assert!(it.next().unwrap().is_ok());
    assert!(it.next().unwrap().is_ok());
    let payload = catch_unwind(AssertUnwindSafe(|| it.next())).unwrap_err();
    assert_eq!(panic_message(&*payload), "bad pixel");
    // A source's reset panicking comes out of reset_state.
    struct BadReset;
    impl Source for BadReset {
        fn next(&mut self) -> Result<Option<Vec<Tensor>>> {
            Ok(None)
        }
        fn reset(&mut self, _: u64) -> Result<()> {
            panic!("reset failed")
        }
    }
    let df = DataFlow::from_source(BadReset).unwrap();
    let payload = catch_unwind(AssertUnwindSafe(|| df.reset_state())).unwrap_err();
    assert_eq!(panic_message(&*payload), "reset failed");
    // A size that panics is unknown.
    struct BadSize;
    impl Source for BadSize {
        fn next(&mut self) -> Result<Option<Vec<Tensor>>> {
            Ok(None)
        }
        fn size(&self) -> Option<i64> {
            panic!("no size")
        }
    }
    let df = DataFlow::from_source(BadSize).unwrap();
    let payload = catch_unwind(AssertUnwindSafe(|| df.size())).unwrap_err();
    assert_eq!(panic_message(&*payload), "no size");

    // On the library's threads: an error with the panic's message.
    let options = ParallelMapOptions { n_threads: 2, ordered: true, strict: true, ..Default::default() };
    let df = DataFlow::from_tensors(&[&rows4], Order::Sequential).unwrap().parallel_map(&options, boom).unwrap();
    let e = df.iter().find_map(|d| d.err()).unwrap();
    assert_eq!(e, Error::new(Code::Callback, "panic in the parallel map function: bad pixel"));
    let df = DataFlow::from_tensors(&[&rows4], Order::Sequential).unwrap().map(boom).unwrap().prefetch(2).unwrap();
    let e = df.iter().find_map(|d| d.err()).unwrap();
    assert_eq!(e, Error::new(Code::Callback, "panic in the map function: bad pixel"));
    // Nothing is left pending: a clean pipeline works.
    assert_eq!(pass_values(&DataFlow::from_tensors(&[&rows4], Order::Sequential).unwrap()), vec![0, 1, 2, 3]);
}

#[test]
fn closures_are_dropped_exactly_once_with_the_last_reference() {
    let drops = Arc::new(AtomicUsize::new(0));
    let rows3 = rows(3);
    let (g1, g2, g3) = (DropGuard(Arc::clone(&drops)), DropGuard(Arc::clone(&drops)), DropGuard(Arc::clone(&drops)));
    let src = DataFlow::from_iter(move || {
        let _keep = &g1;
        (0..3).map(|i| vec![scalar(i)])
    })
    .unwrap();
    let mapped = src
        .map(move |_| -> Result<_> {
            let _keep = &g2;
            Ok(())
        })
        .unwrap();
    let par = mapped
        .parallel_map(&ParallelMapOptions::default(), move |_| -> Result<_> {
            let _keep = &g3;
            Ok(())
        })
        .unwrap();
    drop(src);
    drop(mapped);
    assert_eq!(drops.load(Ordering::SeqCst), 0); // par keeps them
    drop(par);
    assert_eq!(drops.load(Ordering::SeqCst), 3);
    // A combinator refused by the library drops its closure at once.
    let g = DropGuard(Arc::clone(&drops));
    let df = DataFlow::from_tensors(&[&rows3], Order::Sequential).unwrap();
    let _consumer = df.batch(1, Remainder::Drop).unwrap();
    let e = df
        .map(move |_| -> Result<_> {
            let _keep = &g;
            Ok(())
        })
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert_eq!(drops.load(Ordering::SeqCst), 4);
}

// ------------------------------------------------------------ training

#[test]
fn a_config_takes_steps_per_epoch_from_a_sized_closure_source_or_says_which_option_is_missing() {
    let batch = |i: &mut i64| -> Result<Option<Vec<Tensor>>> {
        *i += 1;
        if *i > 4 {
            *i = 0;
            return Ok(None);
        }
        Ok(Some(vec![Tensor::from_vec(vec![0.5f32; 48], &[16, 3])?, Tensor::from_vec(vec![1f32; 16], &[16, 1])?]))
    };
    let model = regression_model();
    // Without a size, and without steps_per_epoch: refused at once.
    let mut i = 0;
    let df = DataFlow::from_fn(move || batch(&mut i)).unwrap();
    let e = Trainer::from_config(TrainConfig { options: Some(quiet(3)), ..TrainConfig::from_dataflow(&model, &df) })
        .err()
        .unwrap();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().starts_with("Trainer::from_config: TrainerOptions::steps_per_epoch is not set"), "{e}");
    assert!(e.message().contains("DataFlow::from_fn_sized"), "{e}");
    // With one: 3 epochs of 4 steps.
    let mut i = 0;
    let df = DataFlow::from_fn_sized(4, move || batch(&mut i)).unwrap();
    assert_eq!(df.size(), Some(4));
    let mut t =
        Trainer::from_config(TrainConfig { options: Some(quiet(3)), ..TrainConfig::from_dataflow(&model, &df) })
            .unwrap();
    assert_eq!(t.run().unwrap(), RunOutcome::Finished);
    assert_eq!(t.global_step(), 12);
    assert_eq!(DataFlow::from_fn_sized(-1, || Ok::<_, Error>(None)).err().unwrap().code(), Code::InvalidArgument);
}

/// Each step's cost, as a user records it: read from the step's output after
/// each step (the monitors get only its moving average, once per epoch).
fn cost_log(costs: &RefCell<Vec<f64>>) -> Callback<'_> {
    Callback::on(Events::AFTER_RUN, move |ctx, _, _| {
        costs.borrow_mut().push(ctx.output_scalar("cost")?);
        Ok(Flow::Continue)
    })
    .name("cost_log")
    .build()
    .unwrap()
}

fn quiet(max_epoch: i64) -> TrainerOptions {
    TrainerOptions {
        max_epoch,
        console: false,
        progress: Progress::Off,
        default_callbacks: false,
        default_monitors: false,
        ..Default::default()
    }
}

/// y = x . [1, -2, 3] + 0.5 on 256 rows; batches of 16.
fn regression_data() -> (Tensor, Tensor) {
    let n = 256usize;
    let mut s = 12345u64;
    let mut xs = Vec::with_capacity(n * 3);
    let mut ys = Vec::with_capacity(n);
    for _ in 0..n {
        let mut row = [0f32; 3];
        for v in &mut row {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            *v = ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0;
        }
        xs.extend_from_slice(&row);
        ys.push(row[0] - 2.0 * row[1] + 3.0 * row[2] + 0.5);
    }
    (Tensor::from_vec(xs, &[n as i64, 3]).unwrap(), Tensor::from_vec(ys, &[n as i64, 1]).unwrap())
}

fn regression_model<'a>() -> Model<'a> {
    let model = Model::new(
        &[InputSpec::new("x", DType::F32, &[-1, 3]), InputSpec::new("y", DType::F32, &[-1, 1])],
        |tower, inputs| {
            let p = tower.fc("fc", &inputs[0], 1, &LayerOptions::default())?;
            let cost = nn::mse(&p, &inputs[1])?;
            tower.set_cost(&cost)?;
            tower.set_output("cost", &cost)
        },
    )
    .unwrap();
    let opt = Optimizer::new("sgd").unwrap();
    opt.set("learning_rate", 0.1).unwrap();
    model.set_optimizer(&opt).unwrap();
    model
}

#[test]
fn a_train_config_with_a_dataflow_trains_and_the_inference_runner_validates() {
    tptrain::manual_seed(1).unwrap();
    let (x, y) = regression_data();
    let model = regression_model();
    let train = DataFlow::from_tensors(&[&x, &y], Order::Shuffled).unwrap().batch(16, Remainder::Drop).unwrap();
    let test = DataFlow::from_tensors(&[&x, &y], Order::Sequential).unwrap().batch(64, Remainder::Keep).unwrap();
    let runner = Callback::inference_runner(&model, &test, &["cost"]).unwrap();
    let costs = RefCell::new(Vec::new());
    let config = TrainConfig {
        options: Some(quiet(4)),
        callbacks: vec![runner, cost_log(&costs)],
        ..TrainConfig::from_dataflow(&model, &train)
    };
    assert!(format!("{config:?}").contains("dataflow: Some("));
    let mut t = Trainer::from_config(config).unwrap();
    assert_eq!(t.run().unwrap(), RunOutcome::Finished);
    assert_eq!(t.global_step(), 4 * 16); // steps_per_epoch from the dataflow: 256 / 16
    assert_eq!(t.scalar_history("cost").unwrap().len(), 4); // its moving average, once per epoch
    let costs = costs.borrow();
    assert_eq!(costs.len(), 4 * 16);
    let first: f64 = costs[..8].iter().sum::<f64>() / 8.0;
    let last: f64 = costs[costs.len() - 8..].iter().sum::<f64>() / 8.0;
    assert!(last < first / 10.0, "the cost fell from {first} to {last}");
    let validation = t.scalar_history("validation_cost").unwrap();
    assert_eq!(validation.len(), 4); // once per epoch
    assert!(validation[3].value < validation[0].value, "{validation:?}");
    assert!(validation[3].value < 0.05, "{validation:?}");
    assert!(t.scalar_latest("QueueInput/queue_size").is_ok());
    // The trainer consumed `train`: it cannot be iterated here any more.
    assert!(train.iter().next().unwrap().is_err());

    // Neither or both of input and dataflow.
    let e = Trainer::from_config(TrainConfig { input: None, ..TrainConfig::new(&model, Input::dummy(4).unwrap()) })
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    let other = DataFlow::from_tensors(&[&x, &y], Order::Sequential).unwrap().batch(16, Remainder::Drop).unwrap();
    let e = launch_train(TrainConfig {
        dataflow: Some(&other),
        options: Some(quiet(1)),
        ..TrainConfig::new(&model, Input::dummy(4).unwrap())
    })
    .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
}

/// `TrainConfig::input_options` shape the input made from the dataflow: a
/// queue that does not repeat ends the run after one pass; with an input
/// they are an error.
#[test]
fn a_train_configs_input_options_shape_its_queue() {
    let (x, y) = regression_data();
    let model = regression_model();
    let train = DataFlow::from_tensors(&[&x, &y], Order::Sequential).unwrap().batch(16, Remainder::Drop).unwrap();
    let once = InputOptions { capacity: 2, repeat: false, ..InputOptions::default() };
    let outcome = launch_train(TrainConfig {
        options: Some(quiet(3)),
        input_options: Some(once),
        ..TrainConfig::from_dataflow(&model, &train)
    })
    .unwrap();
    let reason = outcome.stop_reason().expect("stopped at the end of the pass");
    assert!(reason.contains("the input does not repeat"), "{reason}");
    let e = Trainer::from_config(TrainConfig {
        input_options: Some(once),
        ..TrainConfig::new(&model, Input::dummy(4).unwrap())
    })
    .unwrap_err();
    assert!(e.message().contains("config->input_options is set with config->input"), "{e}");
}

#[test]
fn dataflow_errors_and_panics_end_training() {
    let (x, y) = regression_data();
    let model = regression_model();
    let step = Arc::new(AtomicUsize::new(0));
    let failing = |kind: InputKind, panics: bool| {
        let step = Arc::clone(&step);
        step.store(0, Ordering::SeqCst);
        let df = DataFlow::from_tensors(&[&x, &y], Order::Sequential)
            .unwrap()
            .batch(16, Remainder::Drop)
            .unwrap()
            .map(move |_| {
                if step.fetch_add(1, Ordering::SeqCst) == 5 {
                    if panics {
                        panic!("the reader crashed");
                    }
                    return Err(Error::new(Code::Io, "the shard vanished"));
                }
                Ok(())
            })
            .unwrap();
        Input::from_dataflow(&df, &InputOptions { kind, ..Default::default() }).unwrap()
    };
    for kind in [InputKind::Queue, InputKind::Feed] {
        let mut t = Trainer::new(&quiet(3)).unwrap();
        t.set_model(&model, failing(kind, false)).unwrap();
        assert_eq!(t.run().unwrap_err(), Error::new(Code::Io, "the shard vanished"), "{kind:?}");
    }
    // A panic on the queue's thread: an error with its message.
    let mut t = Trainer::new(&quiet(3)).unwrap();
    t.set_model(&model, failing(InputKind::Queue, true)).unwrap();
    assert_eq!(t.run().unwrap_err(), Error::new(Code::Callback, "panic in the map function: the reader crashed"));
    // A panic on the training thread (a feed input): resumed by run.
    let mut t = Trainer::new(&quiet(3)).unwrap();
    t.set_model(&model, failing(InputKind::Feed, true)).unwrap();
    let payload = catch_unwind(AssertUnwindSafe(|| t.run())).unwrap_err();
    assert_eq!(panic_message(&*payload), "the reader crashed");
}

#[test]
fn feed_staging_and_dummy_inputs() {
    let (x, y) = regression_data();
    let model = regression_model();
    // A feed input that does not repeat: the end of the pass ends training.
    let df = DataFlow::from_tensors(&[&x, &y], Order::Sequential).unwrap().batch(16, Remainder::Drop).unwrap();
    let input = Input::from_dataflow(&df, &InputOptions { kind: InputKind::Feed, repeat: false, ..Default::default() })
        .unwrap();
    let mut t = Trainer::new(&TrainerOptions { steps_per_epoch: Some(10), ..quiet(5) }).unwrap();
    t.set_model(&model, input.staging(None).unwrap()).unwrap();
    assert!(matches!(t.run().unwrap(), RunOutcome::Stopped(_)));
    assert_eq!(t.global_step(), 16);
    // A bad device is named.
    let e = Input::dummy(4).unwrap().staging(Some("gpu:7")).unwrap_err();
    assert!(e.message().contains("gpu:7"), "{e}");
    // Dummy batches: the model runs without data.
    let costs = RefCell::new(Vec::new());
    let mut t = Trainer::new(&TrainerOptions { steps_per_epoch: Some(3), ..quiet(2) }).unwrap();
    t.set_model(&model, Input::dummy(8).unwrap()).unwrap();
    t.add_callback(cost_log(&costs)).unwrap();
    assert_eq!(t.run().unwrap(), RunOutcome::Finished);
    assert_eq!(t.global_step(), 6);
    drop(t);
    // Zero inputs and targets: the cost is the trained bias squared, falling.
    let costs = costs.into_inner();
    assert_eq!(costs.len(), 6);
    assert!(costs[5] < costs[0], "{costs:?}");
}
