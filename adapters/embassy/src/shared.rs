//! Where a slot's mutable state lives on the edge: [`CellShared`], a `RefCell` for one
//! executor (embassy's thread-mode executor, or the std executor in tests).
//!
//! Owns: the cell. Not `Sync`: a slot is used from one executor. The driver never holds the
//! borrow across an await. Concurrent callers that wait for a handshake in progress are woken
//! through the core's slot state itself (its change counter and a few wakers, see
//! [`MAX_WAITERS`]), which the driver reaches through [`CellShared::with`].

use core::cell::RefCell;

/// Tasks that can wait on one slot at once before a wake-up wakes all (spurious wake-ups are
/// allowed, so more waiters still work, only less efficiently). Kept by the core's slot state.
pub use verifi_mcp_core::machine::MAX_WAITERS;

/// A value shared by the tasks of one executor.
pub struct CellShared<T> {
    value: RefCell<T>,
}

impl<T> CellShared<T> {
    /// Shares `value`.
    pub const fn new(value: T) -> Self {
        CellShared {
            value: RefCell::new(value),
        }
    }

    /// Runs `f` on the value; never held across an await.
    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut self.value.borrow_mut())
    }

    /// Runs `f` on the value, or not at all while it is in use (a re-entry; the driver never
    /// holds it across an await): the driver takes a closure not run as the end of the op,
    /// where `with` would panic. No panic path in the slot's code.
    pub(crate) fn try_with(&self, f: impl FnOnce(&mut T)) {
        if let Ok(mut value) = self.value.try_borrow_mut() {
            f(&mut value);
        }
    }
}
