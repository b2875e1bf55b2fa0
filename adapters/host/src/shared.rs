//! `HostShared<T>`: a slot's mutable state behind a `std::sync::Mutex`, with an
//! `event-listener` `Event` for "it changed".
//!
//! Owns: the lock and the wake-ups. The lock is never held across an await (the closure API
//! makes that impossible). Every notify bumps a generation; `changed(since)` returns once the
//! generation differs from `since`, so a notify between a waiter's check and its wait is never
//! lost.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use event_listener::Event;
use verifi_mcp_core::drive::Shared;

/// State shared by every task using one slot.
#[derive(Debug)]
pub struct HostShared<T> {
    state: Mutex<T>,
    event: Event,
    generation: AtomicU64,
}

impl<T> HostShared<T> {
    /// Wraps `state`.
    pub fn new(state: T) -> Self {
        HostShared {
            state: Mutex::new(state),
            event: Event::new(),
            generation: AtomicU64::new(0),
        }
    }
}

impl<T> Shared<T> for HostShared<T> {
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let mut guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut guard)
    }

    fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    async fn changed(&self, since: u64) {
        loop {
            if self.generation.load(Ordering::SeqCst) != since {
                return;
            }
            let listener = self.event.listen();
            if self.generation.load(Ordering::SeqCst) != since {
                return;
            }
            listener.await;
        }
    }

    fn notify(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.event.notify(usize::MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    #[test]
    fn notify_wakes_a_waiter_and_with_mutates() {
        let s = Arc::new(HostShared::new(0u32));
        let s2 = s.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(5));
            s2.with(|v| *v = 7);
            s2.notify();
        });
        smol::block_on(async {
            let end = Instant::now() + Duration::from_secs(5);
            loop {
                let since = s.generation();
                if s.with(|v| *v) == 7 {
                    break;
                }
                assert!(Instant::now() < end, "never saw the change");
                s.changed(since).await;
            }
        });
        t.join().unwrap();
    }
}
