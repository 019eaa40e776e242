//! One feature set for the dependencies all minik8s binaries share.
//!
//! Cargo turns on a dependency's features for the packages it is asked to
//! build, together. `cargo build -p master` and `cargo build -p master -p
//! kubelet` therefore compiled `futures-util`, `tower`, `hyper`... with
//! different features, and so everything above them twice: a script that
//! built one binary after another built the others rebuilt most of the
//! workspace (minutes on 2 cores). Every binary package depends on this
//! crate, which asks for each shared dependency with the union of the
//! features any binary uses, so any subset compiles them the same way and
//! reuses what an earlier build made.
//!
//! The crate has no code. When a dependency changes, `scripts/check-features.sh`
//! (run by scripts/test.sh) names what to add to its Cargo.toml.
