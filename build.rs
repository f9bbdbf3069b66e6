//! With the `python` feature, `cfg(plain_list)` when the extension is built
//! for one version of CPython with the GIL (not the stable ABI, not
//! free-threaded CPython, whose lists keep their items in another layout,
//! not PyPy or GraalPy): there the bindings build lists of ids in an item
//! array of their own (src/py/mod.rs, `new_list`). `cfg(gc_untrack)` for
//! any CPython build: the lists of a batch are built untracked by the cycle
//! collector (src/py/mod.rs, `BatchLists`; the calls are in the stable ABI,
//! but not in PyPy's).

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-check-cfg=cfg(plain_list)");
    println!("cargo:rustc-check-cfg=cfg(gc_untrack)");
    #[cfg(feature = "python")]
    {
        use pyo3_build_config::PythonImplementation;
        let py = pyo3_build_config::get();
        let abi3 = py.abi3 || std::env::var_os("CARGO_FEATURE_ABI3").is_some();
        if py.implementation == PythonImplementation::CPython && !abi3 && !py.is_free_threaded() {
            println!("cargo:rustc-cfg=plain_list");
        }
        if py.implementation == PythonImplementation::CPython {
            println!("cargo:rustc-cfg=gc_untrack");
        }
    }
}
