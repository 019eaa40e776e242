//! `apiserver`: serves the Kubernetes API for minik8s.
use clap::Parser;

/// mimalloc instead of glibc's malloc: the apiserver allocates and frees many
/// small JSON values per request, and glibc's allocator was a quarter of its
/// CPU at 1,000 nodes; with mimalloc the bind rate went from 358 to 627
/// pods/s (see doc/benchmarks.md, "Scale").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "apiserver", version = minik8s_api::release::GIT_VERSION, about = "minik8s API server")]
struct Args {
    #[command(flatten)]
    config: apiserver::Config,
}

fn main() -> anyhow::Result<()> {
    // Resident memory follows what the apiserver holds, not its highest
    // peak (see minik8s_process::memory).
    minik8s_process::memory::run(async {
        let mut config = Args::parse().config;
        let _tracing = minik8s_trace::init(apiserver::tracing_options(&mut config, "apiserver"));
        apiserver::run(config).await
    })
}
