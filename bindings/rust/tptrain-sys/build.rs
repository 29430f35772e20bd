//! Finds libtptrain without outside crates:
//! 1. `TPTRAIN_LIB_DIR`: a directory holding libtptrain.so (e.g. the Meson build tree);
//! 2. otherwise `pkg-config --libs tptrain` (honours PKG_CONFIG_PATH, so an
//!    uninstalled build tree works with PKG_CONFIG_PATH=build/meson-uninstalled).
use std::env;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=TPTRAIN_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    if let Ok(dir) = env::var("TPTRAIN_LIB_DIR") {
        println!("cargo:rustc-link-search=native={dir}");
        println!("cargo:rustc-link-lib=dylib=tptrain");
        return;
    }
    match Command::new("pkg-config").args(["--libs", "tptrain"]).output() {
        Ok(out) if out.status.success() => {
            let flags = String::from_utf8_lossy(&out.stdout).to_string();
            for flag in flags.split_whitespace() {
                if let Some(dir) = flag.strip_prefix("-L") {
                    println!("cargo:rustc-link-search=native={dir}");
                } else if let Some(lib) = flag.strip_prefix("-l") {
                    println!("cargo:rustc-link-lib=dylib={lib}");
                }
            }
        }
        _ => {
            // Fall back to the linker's default path (an installed libtptrain).
            println!("cargo:warning=pkg-config could not find tptrain; set TPTRAIN_LIB_DIR or PKG_CONFIG_PATH");
            println!("cargo:rustc-link-lib=dylib=tptrain");
        }
    }
}
