//! `HostShared<T>`: a slot's mutable state behind a `std::sync::Mutex`, with an
//! `event-listener` `Event` for "it changed".
//!
//! Owns: the lock and the wake-ups. The lock is never held across an await (the closure API
//! makes that impossible). A notify that lands between a waiter's check and its `changed()`
//! would be lost with a bare event, so every notify bumps a generation and `changed()` also
//! returns after a short poll interval: a lost wake-up costs at most [`POLL_INTERVAL`], never a
//! hang.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use event_listener::Event;

/// The longest `changed()` waits without a notify (spurious wake-ups are allowed).
pub const POLL_INTERVAL: Duration = Duration::from_millis(25);

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

    /// Runs `f` with the state locked.
    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let mut guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut guard)
    }

    /// Waits for a notify (or [`POLL_INTERVAL`]).
    pub async fn changed(&self) {
        let seen = self.generation.load(Ordering::SeqCst);
        let listener = self.event.listen();
        if self.generation.load(Ordering::SeqCst) != seen {
            return;
        }
        futures_lite::future::or(listener, async {
            async_io::Timer::after(POLL_INTERVAL).await;
        })
        .await;
    }

    /// Wakes every waiter.
    pub fn notify(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.event.notify(usize::MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Instant;

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
            while s.with(|v| *v) != 7 {
                assert!(Instant::now() < end, "never saw the change");
                s.changed().await;
            }
        });
        t.join().unwrap();
    }
}
