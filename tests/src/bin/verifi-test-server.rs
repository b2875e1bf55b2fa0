//! `verifi-test-server --mode stateful|stateless|json --bind ADDR:PORT`: the tests' rmcp server
//! as a process (for tests that run it elsewhere, e.g. inside a network namespace). Prints its
//! base URL on stdout (flushed), then serves until killed. `--stdio` serves the same tools
//! over stdio instead, until stdin ends. `--tasks` offers the 2026 tasks extension and its two
//! task tools (`long_scan`, `confirm_task`; see `ServerOptions::tasks`).

use std::net::SocketAddr;
use std::process::ExitCode;

use verifi_mcp_tests::{Mode, ServerOptions, TestServer};

fn usage() -> ExitCode {
    eprintln!(
        "usage: verifi-test-server [--mode stateful|stateless|json] [--bind ADDR:PORT] [--no-nodelay] [--tasks] | --stdio"
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut opts = ServerOptions::new(Mode::Stateful);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--mode" => match args.next().as_deref().and_then(Mode::parse) {
                Some(m) => opts.mode = m,
                None => return usage(),
            },
            "--bind" => match args.next().and_then(|s| s.parse::<SocketAddr>().ok()) {
                Some(b) => opts.bind = b,
                None => return usage(),
            },
            "--no-nodelay" => opts.nodelay = false,
            "--tasks" => opts.tasks = true,
            "--stdio" => {
                return match verifi_mcp_tests::servers::serve_stdio() {
                    Ok(()) => ExitCode::SUCCESS,
                    Err(e) => {
                        eprintln!("verifi-test-server: stdio: {e}");
                        ExitCode::FAILURE
                    }
                };
            }
            _ => return usage(),
        }
    }
    let server = match TestServer::start_with(opts) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("verifi-test-server: cannot start: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("{}", server.base_url());
    let _ = std::io::Write::flush(&mut std::io::stdout());
    loop {
        std::thread::park();
    }
}
