//! `master`: the control plane in one process for lab use (as k3s does):
//! the apiserver, then the scheduler talking to it over HTTP like any client.
//! The controller manager joins here when it exists.
use clap::Parser;

#[derive(Parser)]
#[command(
    name = "master",
    about = "minik8s control plane: apiserver + scheduler"
)]
struct Args {
    #[command(flatten)]
    apiserver: apiserver::Config,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    minik8s_client::init_logging();
    let args = Args::parse();
    // The components reach the apiserver on loopback at its port.
    let port = args
        .apiserver
        .listen
        .rsplit(':')
        .next()
        .unwrap_or("8080")
        .to_string();
    let local = format!("http://127.0.0.1:{port}");
    let api = tokio::spawn(apiserver::run(args.apiserver));
    let client = minik8s_client::Client::new(&local);
    let sched = tokio::spawn(scheduler::run(client, scheduler::Config::default()));
    tokio::select! {
        r = api => r??,
        r = sched => r??,
    }
    Ok(())
}
