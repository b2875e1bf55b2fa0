//! `signals`: how `mcp` ends early, and still cleanly. The first SIGINT, SIGTERM or SIGHUP
//! (or a closed stdout, see [`crate::out`]) stops the command: its in-flight calls are
//! dropped, which tells their servers (`notifications/cancelled`, or `tasks/cancel` for a
//! call that became a task), then every run's context is closed (the cancellations sent
//! first, sessions deleted, stdio servers closed: stdin, SIGTERM to the group, SIGKILL), what
//! was cancelled is said on stderr, and the exit status is 128 + the signal (130, 143, 129;
//! 0 for a closed stdout). A second signal, or a wind-down that overruns
//! [`FORCE_AFTER`], ends the process at once, after SIGKILL to every stdio server's process
//! group: no child outlives `mcp`.
//!
//! Owns: the signal thread, the registry of open runs and in-flight operations. Does not own:
//! the cancellation messages themselves (the host library's, when a call is dropped).

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use verifi_mcp_host::{HarnessContext, SlotHandle};

/// Longest the wind-down after the first signal may take before what is left is killed.
pub const WIND_DOWN: Duration = Duration::from_secs(8);
/// After the first signal, the process ends at once when the wind-down has not ended it by
/// then.
pub const FORCE_AFTER: Duration = Duration::from_secs(10);
/// After the first signal, the process ends at once when the command has not begun its
/// wind-down by then: it is blocked outside the executor (reading stdin), with nothing on the
/// wire to cancel.
pub const TAKE_WITHIN: Duration = Duration::from_secs(1);

/// Set when [`run`] took the stop and began the wind-down.
static TAKEN: AtomicBool = AtomicBool::new(false);

/// Why a command stops early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// SIGINT, SIGTERM or SIGHUP (its number).
    Signal(i32),
    /// The reader of stdout went away.
    StdoutClosed,
}

/// Signal numbers, as the exit status names them (the same on every Unix).
const SIGHUP: i32 = 1;
const SIGINT: i32 = 2;
const SIGTERM: i32 = 15;

impl Stop {
    /// The exit status: 128 + the signal's number; 0 for a closed stdout.
    pub fn exit_code(self) -> u8 {
        match self {
            Stop::Signal(n) => u8::try_from(128 + n).unwrap_or(1),
            Stop::StdoutClosed => 0,
        }
    }

    /// `SIGINT`, `SIGTERM`, `SIGHUP`, or what else stopped the command.
    pub fn name(self) -> String {
        match self {
            Stop::Signal(SIGINT) => "SIGINT".into(),
            Stop::Signal(SIGTERM) => "SIGTERM".into(),
            Stop::Signal(SIGHUP) => "SIGHUP".into(),
            Stop::Signal(n) => format!("signal {n}"),
            Stop::StdoutClosed => "stdout closed".into(),
        }
    }
}

struct Registry {
    /// Every run's context and slot (their stdio servers are closed on a stop).
    runs: Vec<(HarnessContext, SlotHandle)>,
    /// Stdio servers' process ids seen at the stop (a closing server is no longer listed by
    /// its slot).
    pids: Vec<u32>,
    /// What is in flight: (id, label).
    in_flight: Vec<(u64, String)>,
    next: u64,
}

static REG: Mutex<Registry> = Mutex::new(Registry {
    runs: Vec::new(),
    pids: Vec::new(),
    in_flight: Vec::new(),
    next: 0,
});

type Chan = (smol::channel::Sender<Stop>, smol::channel::Receiver<Stop>);
static STOP: OnceLock<Chan> = OnceLock::new();

fn chan() -> &'static Chan {
    STOP.get_or_init(|| smol::channel::bounded(4))
}

fn reg() -> MutexGuard<'static, Registry> {
    REG.lock().unwrap_or_else(|e| e.into_inner())
}

/// Asks the running command to stop (see the module's description).
pub fn request_stop(stop: Stop) {
    let _ = chan().0.try_send(stop);
}

/// Registers a run, so a stop closes it and a forced end kills its stdio servers.
pub fn watch(ctx: &HarnessContext, slot: &SlotHandle) {
    reg().runs.push((ctx.clone(), slot.clone()));
}

/// An operation in flight, named in the stop's message while this lives.
#[must_use = "the operation is in flight while this lives"]
pub struct InFlight(u64);

impl Drop for InFlight {
    fn drop(&mut self) {
        reg().in_flight.retain(|(id, _)| *id != self.0);
    }
}

/// Marks `label` (a tool's name, `tools/list`, `batch` …) as in flight.
pub fn in_flight(label: &str) -> InFlight {
    let mut r = reg();
    r.next += 1;
    let id = r.next;
    r.in_flight.push((id, label.to_owned()));
    InFlight(id)
}

fn all_pids(r: &Registry) -> Vec<u32> {
    let mut pids = r.pids.clone();
    for (_, slot) in &r.runs {
        pids.extend(slot.stdio_pids());
    }
    pids.sort_unstable();
    pids.dedup();
    pids
}

/// SIGKILL to each stdio server's process group (the server and what it started).
fn kill_groups(pids: &[u32]) {
    #[cfg(unix)]
    for pid in pids {
        use rustix::process::{Pid, Signal, kill_process_group};
        if let Some(p) = i32::try_from(*pid).ok().and_then(Pid::from_raw) {
            let _ = kill_process_group(p, Signal::KILL);
        }
    }
    #[cfg(not(unix))]
    let _ = pids;
}

/// Ends the process at once: every stdio server's group killed, the stop's exit status.
fn force_exit(stop: Stop) -> ! {
    let pids = all_pids(&reg());
    kill_groups(&pids);
    crate::out::stderr_line(&format!("mcp: {}: ended at once", stop.name()));
    std::process::exit(i32::from(stop.exit_code()))
}

/// Starts listening for SIGINT, SIGTERM and SIGHUP (Unix; elsewhere Ctrl-C only). The first
/// asks the command to stop; a second, the command not taking the stop within
/// [`TAKE_WITHIN`], or [`FORCE_AFTER`] without an end, ends the process.
pub fn install() {
    use async_signal::{Signal, Signals};
    use futures_lite::StreamExt;
    #[cfg(unix)]
    let wanted = [Signal::Int, Signal::Term, Signal::Hup];
    #[cfg(not(unix))]
    let wanted = [Signal::Int];
    let Ok(mut signals) = Signals::new(wanted) else {
        return;
    };
    let _ = std::thread::Builder::new()
        .name("mcp-signals".into())
        .spawn(move || {
            smol::block_on(async move {
                let first = loop {
                    match signals.next().await {
                        Some(Ok(s)) => break s,
                        Some(Err(_)) => continue,
                        None => return,
                    }
                };
                let stop = Stop::Signal(first as i32);
                request_stop(stop);
                smol::Timer::after(TAKE_WITHIN).await;
                if !TAKEN.load(Ordering::SeqCst) {
                    force_exit(stop);
                }
                futures_lite::future::or(
                    async {
                        while let Some(s) = signals.next().await {
                            if s.is_ok() {
                                return;
                            }
                        }
                    },
                    async {
                        smol::Timer::after(FORCE_AFTER).await;
                    },
                )
                .await;
                force_exit(stop)
            })
        });
}

/// Runs `command` until it ends or a stop is asked for. Ok: its output (any run it left open
/// with a live stdio server is closed first). Err: the exit status after the wind-down.
pub async fn run<T>(command: impl Future<Output = T>) -> Result<T, u8> {
    let rx = chan().1.clone();
    let ended = futures_lite::future::or(async { Ok(command.await) }, async {
        let stop = rx.recv().await.unwrap_or(Stop::StdoutClosed);
        TAKEN.store(true, Ordering::SeqCst);
        // Named now: the command's in-flight marks go when it is dropped.
        let labels: Vec<String> = reg().in_flight.iter().map(|(_, l)| l.clone()).collect();
        Err((stop, labels))
    })
    .await;
    // Here the command's future is dropped: its in-flight calls are being cancelled.
    match ended {
        Ok(v) => {
            let runs = std::mem::take(&mut reg().runs);
            for (ctx, slot) in &runs {
                if !slot.stdio_pids().is_empty() {
                    ctx.close().await;
                }
            }
            Ok(v)
        }
        Err((stop, labels)) => Err(wind_down(stop, &labels).await),
    }
}

/// After a stop: says what is cancelled, closes every run (bounded by [`WIND_DOWN`]), kills
/// what is left, and gives the exit status.
async fn wind_down(stop: Stop, labels: &[String]) -> u8 {
    let runs = {
        let mut r = reg();
        let pids = all_pids(&r);
        r.pids = pids;
        r.runs.clone()
    };
    if let Stop::Signal(_) = stop {
        let what = match labels {
            [] => String::new(),
            l => format!("cancelled {}; ", l.join(", ")),
        };
        let closing = match runs.iter().any(|(_, s)| !s.stdio_pids().is_empty()) {
            true => "ending the session and closing the server process",
            false => "ending the session",
        };
        crate::out::stderr_line(&format!(
            "mcp: {}: {what}{closing} (a second signal ends mcp at once)",
            stop.name()
        ));
    }
    futures_lite::future::or(
        async {
            for (ctx, _) in &runs {
                ctx.close().await;
            }
        },
        async {
            smol::Timer::after(WIND_DOWN).await;
        },
    )
    .await;
    let pids = all_pids(&reg());
    kill_groups(&pids);
    stop.exit_code()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_follow_the_shell_convention() {
        assert_eq!(Stop::Signal(SIGINT).exit_code(), 130);
        assert_eq!(Stop::Signal(SIGTERM).exit_code(), 143);
        assert_eq!(Stop::Signal(SIGHUP).exit_code(), 129);
        assert_eq!(Stop::StdoutClosed.exit_code(), 0);
        assert_eq!(Stop::Signal(SIGTERM).name(), "SIGTERM");
    }

    #[test]
    fn in_flight_marks_last_as_long_as_their_guard() {
        let a = in_flight("echo");
        let b = in_flight("tools/list");
        drop(a);
        let names: Vec<String> = reg().in_flight.iter().map(|(_, l)| l.clone()).collect();
        assert!(names.contains(&"tools/list".to_owned()) && !names.contains(&"echo".to_owned()));
        drop(b);
    }
}
