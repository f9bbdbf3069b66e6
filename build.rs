//! With the `python` feature: the cfgs PyO3 sets for the interpreter it
//! builds for (`Py_GIL_DISABLED`, `PyPy`, `GraalPy`, `Py_3_x`, ...), so that
//! the bindings take their inline list path (src/py/mod.rs, `new_list`) only
//! where CPython's list layout is the plain one.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "python")]
    pyo3_build_config::use_pyo3_cfgs();
    #[cfg(not(feature = "python"))]
    for name in ["Py_GIL_DISABLED", "PyPy", "GraalPy"] {
        println!("cargo:rustc-check-cfg=cfg({name})");
    }
}
