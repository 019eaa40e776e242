//! Empty: it exists so that `[build-dependencies]` unify the features of
//! what proc macros and build scripts use (see src/lib.rs).
fn main() {}
