//! Where a slot's mutable state lives on the edge: [`CellShared`], a `RefCell` for one
//! executor (embassy's thread-mode executor, or the std executor in tests), with a wait list
//! so concurrent callers can wait for a handshake in progress.
//!
//! Owns: the cell, a generation counter and the wakers of waiting tasks. Not `Sync`: a slot is
//! used from one executor. The driver never holds the borrow across an await.

use core::cell::{Cell, RefCell};
use core::future::poll_fn;
use core::task::Poll;

use embassy_sync::waitqueue::MultiWakerRegistration;
use verifi_mcp_core::drive::Shared;

/// Tasks that can wait on one slot at once before a wake-up wakes all (spurious wake-ups are
/// allowed by the contract, so more waiters still work, only less efficiently).
pub const MAX_WAITERS: usize = 4;

/// A value shared by the tasks of one executor, with change notification.
pub struct CellShared<T> {
    value: RefCell<T>,
    generation: Cell<u64>,
    waiters: RefCell<MultiWakerRegistration<MAX_WAITERS>>,
}

impl<T> CellShared<T> {
    /// Shares `value`.
    pub const fn new(value: T) -> Self {
        CellShared {
            value: RefCell::new(value),
            generation: Cell::new(0),
            waiters: RefCell::new(MultiWakerRegistration::new()),
        }
    }
}

impl<T> Shared<T> for CellShared<T> {
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut self.value.borrow_mut())
    }

    fn generation(&self) -> u64 {
        self.generation.get()
    }

    async fn changed(&self, since: u64) {
        poll_fn(|cx| {
            if self.generation.get() != since {
                Poll::Ready(())
            } else {
                self.waiters.borrow_mut().register(cx.waker());
                Poll::Pending
            }
        })
        .await
    }

    fn notify(&self) {
        self.generation.set(self.generation.get().wrapping_add(1));
        self.waiters.borrow_mut().wake();
    }
}
