//! `cargo run --release -p runlog-bench --example delay_proxy -- [MS] [UPSTREAM]`:
//! a proxy on 127.0.0.1 adding MS (default 30) milliseconds to every request
//! to UPSTREAM (`host:port`; default the host and port of `AWS_ENDPOINT_URL`),
//! for any process: it prints `AWS_ENDPOINT_URL=http://127.0.0.1:<port>` and
//! serves until killed (issue 50; `runlog_bench::delay_proxy`).

use runlog_bench::delay_proxy::{DelayProxy, host_port};
use std::time::Duration;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let fail = |why: String| -> ! {
        eprintln!("delay_proxy: {why}");
        std::process::exit(2)
    };
    let ms: u64 = match args.first() {
        None => 30,
        Some(a) => a
            .parse()
            .unwrap_or_else(|_| fail(format!("{a:?}: expected milliseconds"))),
    };
    let endpoint = std::env::var("AWS_ENDPOINT_URL").unwrap_or_default();
    let upstream = match args.get(1) {
        Some(u) => u.clone(),
        None => host_port(&endpoint)
            .unwrap_or_else(|| {
                fail(format!(
                    "no UPSTREAM given and AWS_ENDPOINT_URL={endpoint:?} is not http://host:port"
                ))
            })
            .to_string(),
    };
    let proxy = DelayProxy::start(&upstream, Duration::from_millis(ms))
        .unwrap_or_else(|e| fail(format!("listen before {upstream}: {e}")));
    println!("AWS_ENDPOINT_URL={}", proxy.url());
    eprintln!("delay_proxy: {ms} ms added to every request to {upstream}");
    loop {
        std::thread::park();
    }
}
