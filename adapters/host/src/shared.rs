//! `HostShared<T>`: a slot's mutable state behind a `std::sync::Mutex`.
//!
//! Owns: the lock. The lock is never held across an await (the closure API makes that
//! impossible). Waking ops that wait on the slot needs nothing here: the core's slot state
//! keeps its own change counter and wakers, which the driver reads and wakes while it holds
//! the state through [`HostShared::with`] (`Driver::new(net, cfg, |f| shared.with(f))`).

use std::sync::Mutex;

/// State shared by every task using one slot.
#[derive(Debug)]
pub struct HostShared<T> {
    state: Mutex<T>,
}

impl<T> HostShared<T> {
    /// Wraps `state`.
    pub fn new(state: T) -> Self {
        HostShared {
            state: Mutex::new(state),
        }
    }

    /// Runs `f` on the state under the lock; never held across an await. A poisoned lock is
    /// taken anyway (the state stays consistent between transitions).
    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let mut guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut guard)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn with_mutates_across_threads() {
        let s = Arc::new(HostShared::new(0u32));
        let s2 = s.clone();
        std::thread::spawn(move || s2.with(|v| *v = 7))
            .join()
            .unwrap();
        assert_eq!(s.with(|v| *v), 7);
    }
}
