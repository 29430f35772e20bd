//! Generates the table that names, for each C function this crate calls,
//! the public Rust function or method that calls it (`Model::restore` for
//! `tpt_model_restore`), so that an error's message names the call the
//! program made (see `Error::check`). It is read from this crate's own
//! sources at build time, so it cannot go stale.
use std::collections::{BTreeMap, BTreeSet};
use std::env;
use std::fs;
use std::path::{Path, PathBuf};

/// A function of the crate's sources.
struct Func {
    /// "Model::restore", "set_num_threads", or "restore" for a free
    /// function of a module.
    path: String,
    /// `pub` (not `pub(crate)`), and not in a trait impl.
    public: bool,
    /// The C functions it calls.
    c_calls: Vec<String>,
    /// The names it calls (`name(`), for the C calls of private helpers.
    calls: Vec<String>,
}

fn ident_end(s: &str) -> usize {
    s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(s.len())
}

/// The functions of one file, by brace depth.
fn scan(text: &str, file_type: &str, c_fns: &BTreeSet<String>, out: &mut Vec<Func>) {
    // Open `impl` blocks: (depth, type; "" for a trait impl).
    let mut impls: Vec<(usize, String)> = Vec::new();
    let mut current: Option<(usize, Func)> = None;
    let mut depth = 0usize;
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        let trimmed = code.trim_start();
        if trimmed.starts_with("impl ") || trimmed.starts_with("impl<") {
            impls.push((depth, impl_type(trimmed)));
        }
        // A wrapper made by a macro: `comparison!(ge_tensor, ge, tpt_op_ge,
        // tpt_op_ge_scalar, ">=")` makes the k-th C function's wrapper the
        // k-th lower-case name (else the first), a method of the impl it is
        // in, or of the file's type (`arithmetic!` in tensor.rs: Tensor).
        if current.is_none() && !trimmed.starts_with("macro_rules!") {
            if let Some(args) = trimmed.split_once("!(").map(|(_, a)| a) {
                let words: Vec<&str> =
                    args.split(',').map(|w| w.trim().trim_end_matches(';').trim_end_matches(')')).collect();
                let cs: Vec<&str> = words
                    .iter()
                    .copied()
                    .filter(|w| if c_fns.is_empty() { w.starts_with("tpt_") } else { c_fns.contains(*w) })
                    .collect();
                let methods: Vec<&str> = words
                    .iter()
                    .copied()
                    .filter(|w| {
                        !w.starts_with("tpt_")
                            && !w.is_empty()
                            && w.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
                    })
                    .collect();
                let ty = match impls.last() {
                    Some((_, ty)) if !ty.is_empty() => ty.clone(),
                    _ => {
                        let mut t = file_type.to_string();
                        if let Some(f) = t.get_mut(0..1) {
                            f.make_ascii_uppercase();
                        }
                        t
                    }
                };
                for (k, c) in cs.iter().enumerate() {
                    if let Some(m) = methods.get(k).or_else(|| methods.first()) {
                        out.push(Func {
                            path: format!("{ty}::{m}"),
                            public: true,
                            c_calls: vec![c.to_string()],
                            calls: Vec::new(),
                        });
                    }
                }
            }
        }
        if current.is_none() {
            if let Some((name, public)) = fn_name(trimmed) {
                let (path, in_trait) = match impls.last() {
                    Some((_, ty)) if ty.is_empty() => (name, true),
                    Some((_, ty)) => (format!("{ty}::{name}"), false),
                    None => (name, false),
                };
                current =
                    Some((depth, Func { path, public: public && !in_trait, c_calls: Vec::new(), calls: Vec::new() }));
            }
        }
        if let Some((_, f)) = current.as_mut() {
            let mut i = 0;
            while i < code.len() {
                let rest = &code[i..];
                let end = ident_end(rest);
                if end == 0 {
                    i += rest.chars().next().map_or(1, char::len_utf8);
                    continue;
                }
                let word = &rest[..end];
                // A C function called, or passed on (`self.weighted(sys::tpt_layer_fc, ..)`).
                // (Without the sys crate's list, as when packaged alone: calls only.)
                let c_fn = i >= 5
                    && &code[i - 5..i] == "sys::"
                    && if c_fns.is_empty() {
                        word.starts_with("tpt_") && rest[end..].starts_with('(')
                    } else {
                        c_fns.contains(word)
                    };
                if c_fn {
                    if !f.c_calls.iter().any(|c| c == word) {
                        f.c_calls.push(word.to_string());
                    }
                } else if rest[end..].starts_with('(') {
                    if word.starts_with("tpt_") {
                        // not a function of the sys crate
                    } else if !f.calls.iter().any(|w| w == word) {
                        f.calls.push(word.to_string());
                    }
                }
                i += end;
            }
        }
        for c in code.chars() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth = depth.saturating_sub(1);
                    if matches!(&current, Some((d, _)) if *d == depth) {
                        out.push(current.take().unwrap().1);
                    }
                    // An impl block closes at the depth it opened at.
                    while matches!(impls.last(), Some((d, _)) if *d == depth) {
                        impls.pop();
                    }
                }
                _ => {}
            }
        }
    }
}

/// The type of `impl<'a> Model<'a> {`: "Model"; "" for `impl X for Y`.
fn impl_type(line: &str) -> String {
    let mut s = &line[4..];
    if s.starts_with('<') {
        let mut depth = 0;
        for (i, c) in s.char_indices() {
            match c {
                '<' => depth += 1,
                '>' => {
                    depth -= 1;
                    if depth == 0 {
                        s = &s[i + 1..];
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    let s = s.trim_start();
    if s.contains(" for ") {
        return String::new();
    }
    s[..ident_end(s)].to_string()
}

/// `pub fn name(` gives ("name", true), `fn name(` and `pub(crate) fn`
/// ("name", false).
fn fn_name(line: &str) -> Option<(String, bool)> {
    let (rest, public) = if let Some(r) = line.strip_prefix("pub fn ").or_else(|| line.strip_prefix("pub unsafe fn ")) {
        (r, true)
    } else {
        let r = line.strip_prefix("pub(crate) ").or_else(|| line.strip_prefix("pub(super) ")).unwrap_or(line);
        (r.strip_prefix("fn ").or_else(|| r.strip_prefix("unsafe fn "))?, false)
    };
    let name = &rest[..ident_end(rest)];
    if name.is_empty() {
        None
    } else {
        Some((name.to_string(), public))
    }
}

/// A name without `tpt_`, `::` and `_`, lower case: the C function and the
/// wrapper named after it squash alike ("modelrestore").
fn squash(s: &str) -> String {
    s.trim_start_matches("tpt_").chars().filter(|c| c.is_ascii_alphanumeric()).collect::<String>().to_ascii_lowercase()
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().map_or(false, |x| x == "rs") {
            out.push(p);
        }
    }
}

/// The public functions that make C function `c`, for its messages: the one
/// named after it; else those that call it (directly, or through private
/// helpers), the first one's method name on every type that has it ("Trainer::output or
/// Context::output").
fn callers(c: &str, fns: &[Func]) -> Option<String> {
    if let Some(f) = fns.iter().find(|f| f.public && squash(&f.path) == squash(c)) {
        return Some(f.path.clone());
    }
    // The names that reach `c`: the functions calling it, then those that
    // call one of them, up to three levels of private helpers.
    let mut reaching: Vec<&Func> = fns.iter().filter(|f| f.c_calls.iter().any(|x| x == c)).collect();
    for _ in 0..3 {
        if reaching.iter().any(|f| f.public) {
            break;
        }
        let names: Vec<&str> = reaching.iter().map(|f| f.path.rsplit("::").next().unwrap_or("")).collect();
        reaching = fns.iter().filter(|f| f.calls.iter().any(|w| names.contains(&w.as_str()))).collect();
    }
    let public: Vec<&str> = reaching.iter().filter(|f| f.public).map(|f| f.path.as_str()).collect();
    let first = public.first()?;
    let method = first.rsplit("::").next().unwrap_or(first);
    let mut same: Vec<&str> = public.iter().copied().filter(|p| p.rsplit("::").next() == Some(method)).collect();
    same.dedup();
    same.truncate(3);
    Some(same.join(" or "))
}

fn main() {
    let src = Path::new(&env::var("CARGO_MANIFEST_DIR").unwrap()).join("src");
    println!("cargo:rerun-if-changed={}", src.display());
    // The C functions: those tptrain-sys declares.
    let sys = Path::new(&env::var("CARGO_MANIFEST_DIR").unwrap()).join("../tptrain-sys/src/lib.rs");
    println!("cargo:rerun-if-changed={}", sys.display());
    let c_fns: BTreeSet<String> = fs::read_to_string(&sys)
        .unwrap_or_default()
        .split("pub fn ")
        .skip(1)
        .map(|rest| rest[..ident_end(rest)].to_string())
        .filter(|name| name.starts_with("tpt_"))
        .collect();
    let mut paths = Vec::new();
    files(&src, &mut paths);
    paths.sort();
    let mut fns = Vec::new();
    for p in &paths {
        println!("cargo:rerun-if-changed={}", p.display());
        if let Ok(text) = fs::read_to_string(p) {
            let stem = p.file_stem().and_then(|s| s.to_str()).unwrap_or("");
            let first = fns.len();
            scan(&text, stem, &c_fns, &mut fns);
            // Free functions as a program names them: those of the public
            // modules (lib.rs: `ops` is op.rs, `nn` layer.rs) with the
            // module; the others are re-exported at the crate's root.
            let module = match stem {
                "op" => "ops::",
                "layer" => "nn::",
                "image" => "image::",
                _ => "",
            };
            for f in &mut fns[first..] {
                if !f.path.contains("::") {
                    f.path = format!("{module}{}", f.path);
                }
            }
        }
    }
    let mut table = BTreeMap::new();
    for f in &fns {
        for c in &f.c_calls {
            if !table.contains_key(c) {
                if let Some(name) = callers(c, &fns) {
                    table.insert(c.clone(), name);
                }
            }
        }
    }
    let mut code = String::from("/// (C function, the public Rust call that makes it), sorted by C name.\n");
    code.push_str("static C_CALLERS: &[(&str, &str)] = &[\n");
    for (c, name) in &table {
        code.push_str(&format!("    ({c:?}, {name:?}),\n"));
    }
    code.push_str("];\n");
    fs::write(Path::new(&env::var("OUT_DIR").unwrap()).join("c_callers.rs"), code).unwrap();
}
