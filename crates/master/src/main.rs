//! `master`: the control plane in one process for lab use (as k3s does):
//! the apiserver, then the scheduler and the controller manager talking to it
//! over HTTP like any client.
use clap::Parser;

#[derive(Parser)]
#[command(
    name = "master",
    about = "minik8s control plane: apiserver + scheduler + controller manager"
)]
struct Args {
    #[command(flatten)]
    apiserver: apiserver::Config,
    #[command(flatten)]
    controllers: controller_manager::Config,
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
    let sched = tokio::spawn(scheduler::run(client.clone(), scheduler::Config::default()));
    let controllers = tokio::spawn(controller_manager::run(client, args.controllers));
    tokio::select! {
        r = api => r??,
        r = sched => r??,
        r = controllers => r??,
    }
    Ok(())
}
