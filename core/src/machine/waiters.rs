//! Who waits for a slot's state to change: a change counter and a few wakers, kept inside the
//! slot's state ([`super::SlotState`]) so that waiting needs no lock of the core's own.
//!
//! An op that finds another op's handshake (or era probe, or annotation listing) under way
//! sleeps until the slot's state changed ([`super::Action::Sleep`] with `slot: true`). The
//! waiter reads the counter while it holds the state and, in a later hold, registers its waker
//! unless the counter moved meanwhile; whoever changes the state bumps the counter and wakes
//! every registered waker while holding it. Both happen in one hold of the state, so a change
//! between a waiter's look and its registration is never lost.
//!
//! The registry is fixed (no allocator): [`MAX_WAITERS`] wakers. When it is full, every
//! registered waker is woken (a spurious wake-up: its op looks and sleeps again) and the new
//! one takes the freed room, as embassy-sync's `MultiWakerRegistration` does.

use core::task::Waker;

/// Wakers kept per slot before a registration wakes all of them to make room.
pub const MAX_WAITERS: usize = 4;

/// A slot's change counter and its waiting ops' wakers.
#[derive(Debug, Default)]
pub(crate) struct Waiters {
    generation: u64,
    wakers: [Option<Waker>; MAX_WAITERS],
}

impl Waiters {
    /// The change counter.
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// Bumps the counter and wakes every registered waker.
    pub(crate) fn notify(&mut self) {
        self.generation = self.generation.wrapping_add(1);
        self.wake_all();
    }

    /// True when the counter moved since `since`; else keeps `waker` to be woken by the next
    /// [`notify`](Self::notify).
    pub(crate) fn changed_since(&mut self, since: u64, waker: &Waker) -> bool {
        if self.generation != since {
            return true;
        }
        if self.wakers.iter().flatten().any(|w| w.will_wake(waker)) {
            return false;
        }
        if !self.wakers.iter().any(Option::is_none) {
            self.wake_all();
        }
        if let Some(free) = self.wakers.iter_mut().find(|w| w.is_none()) {
            *free = Some(waker.clone());
        }
        false
    }

    fn wake_all(&mut self) {
        for w in &mut self.wakers {
            if let Some(w) = w.take() {
                w.wake();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_change_before_the_wait_is_seen_and_overflow_wakes_all() {
        let counts: std::vec::Vec<_> = (0..=MAX_WAITERS)
            .map(|_| Arc::new(Count(AtomicUsize::new(0))))
            .collect();
        let wakers: std::vec::Vec<Waker> = counts.iter().map(|c| Waker::from(c.clone())).collect();
        let woken = || -> usize { counts.iter().map(|c| c.0.load(Ordering::SeqCst)).sum() };
        let mut w = Waiters::default();
        let since = w.generation();
        w.notify();
        assert!(w.changed_since(since, &wakers[0]), "the change is not lost");
        let since = w.generation();
        for waker in &wakers[..MAX_WAITERS] {
            assert!(!w.changed_since(since, waker));
        }
        assert!(!w.changed_since(since, &wakers[0]), "kept once");
        assert_eq!(woken(), 0);
        // Full: all are woken, the newcomer kept.
        assert!(!w.changed_since(since, &wakers[MAX_WAITERS]));
        assert_eq!(woken(), MAX_WAITERS);
        w.notify();
        assert_eq!(woken(), MAX_WAITERS + 1);
    }
}
