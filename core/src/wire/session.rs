//! The handshake state machine of one MCP server: lazy, once, shared, never poisoned.
//!
//! `Fresh` → `Initializing { attempt }` → `Ready { session id, version }`. The first caller
//! that finds the session `Fresh` starts an attempt; callers that arrive while it runs wait for
//! *that* attempt and are handed its outcome. A failed attempt returns the state to `Fresh`
//! (its failure is kept only for its own waiters), so the next call makes a real attempt: a
//! rejected handshake is never cached (`docs/design.md#handshake`). A 404 to a request that
//! named the current session id means the server dropped it: back to `Fresh`, and the call
//! machine (`crate::machine`) retries that request once.
//!
//! It owns no I/O: the call machine has `initialize` and `notifications/initialized` sent and
//! reports here. Where the state lives (a lock on the host, a cell on the edge) is the
//! adapter's choice.

use heapless::String;

use super::failure::Failure;
use super::http::MAX_SESSION_ID;
use super::jsonrpc::ProtocolVersion;

/// Where the handshake stands. A ready session carries its snapshot, so "ready" and "what it
/// is ready with" cannot disagree.
// `Ready` carries the session id inline (no allocator to box it).
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// No handshake yet, or the last one failed or was dropped by the server.
    Fresh,
    /// Attempt number `attempt` is in flight.
    Initializing {
        /// The attempt's number.
        attempt: u32,
    },
    /// The handshake is done: what requests in this session send.
    Ready(Snapshot),
}

/// What a caller should do next, from [`Session::begin`].
// `Ready` carries the session id inline (no allocator to box it); it is moved once per call.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(not(feature = "std"), repr(u32))]
pub enum Begin {
    /// The session is ready: go ahead with this snapshot.
    Ready(Snapshot),
    /// You start attempt `attempt`: send `initialize`, then report the outcome.
    Start {
        /// The attempt's number, to report with.
        attempt: u32,
    },
    /// Attempt `attempt` is in flight: wait for a change, then ask [`Session::outcome_of`].
    Wait {
        /// The attempt being waited for.
        attempt: u32,
    },
}

/// What a request needs to know of its session: the id to send and the negotiated version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// The `mcp-session-id` to send, when the server gave one.
    pub session_id: Option<String<MAX_SESSION_ID>>,
    /// The negotiated protocol version.
    pub version: ProtocolVersion,
}

impl Snapshot {
    /// The `mcp-protocol-version` header value to send, if this version wants one.
    pub fn version_header(&self) -> Option<&'static str> {
        self.version
            .sends_version_header()
            .then(|| self.version.as_str())
    }

    /// The session id as a `&str`.
    pub fn id(&self) -> Option<&str> {
        self.session_id.as_deref()
    }
}

/// The handshake state of one server (primary or fallback) of a slot.
#[derive(Debug, Clone)]
pub struct Session {
    phase: Phase,
    next_attempt: u32,
    offered: ProtocolVersion,
    /// The last failed attempt and its failure, for that attempt's waiters. Only a handshake
    /// or a probe can fail and have waiters (features `era-2025`, `probe`); without them the
    /// 2026 era's session is ready at once, and keeps no failure.
    #[cfg(any(feature = "era-2025", feature = "probe"))]
    last_failure: Option<(u32, Failure)>,
    handshakes: u32,
}

impl Session {
    /// A fresh session that will offer `offered` in `initialize`.
    pub fn new(offered: ProtocolVersion) -> Self {
        Session {
            phase: Phase::Fresh,
            next_attempt: 1,
            offered,
            #[cfg(any(feature = "era-2025", feature = "probe"))]
            last_failure: None,
            handshakes: 0,
        }
    }

    /// The version offered in `initialize`.
    pub fn offered(&self) -> ProtocolVersion {
        self.offered
    }

    /// Where the handshake stands.
    pub fn phase(&self) -> &Phase {
        &self.phase
    }

    /// How many handshakes completed (re-initialization after a 404 counts again).
    pub fn handshakes(&self) -> u32 {
        self.handshakes
    }

    /// The ready snapshot, if the handshake is done.
    pub fn snapshot(&self) -> Option<&Snapshot> {
        match &self.phase {
            Phase::Ready(s) => Some(s),
            _ => None,
        }
    }

    /// Decide what a caller does: proceed, start the handshake, or wait for the running one.
    pub fn begin(&mut self) -> Begin {
        match &self.phase {
            Phase::Ready(s) => Begin::Ready(s.clone()),
            Phase::Initializing { attempt } => Begin::Wait { attempt: *attempt },
            Phase::Fresh => {
                let attempt = self.next_attempt;
                self.next_attempt = self.next_attempt.wrapping_add(1);
                self.phase = Phase::Initializing { attempt };
                Begin::Start { attempt }
            }
        }
    }

    /// For a waiter of `attempt`: `None` while it runs; `Some(Ok(snapshot))` once the session
    /// is ready; `Some(Err(failure))` when that attempt failed. A waiter that finds the session
    /// `Fresh` for another reason (e.g. dropped again) gets `None` and calls [`begin`](Self::begin).
    pub fn outcome_of(&self, attempt: u32) -> Option<Result<Snapshot, Failure>> {
        match &self.phase {
            Phase::Initializing { attempt: a } if *a == attempt => None,
            Phase::Ready(s) => Some(Ok(s.clone())),
            #[cfg(any(feature = "era-2025", feature = "probe"))]
            _ => match &self.last_failure {
                Some((a, f)) if *a == attempt => Some(Err(f.clone())),
                _ => None,
            },
            #[cfg(not(any(feature = "era-2025", feature = "probe")))]
            _ => None,
        }
    }

    /// Attempt `attempt` succeeded. A report for a stale attempt is ignored.
    pub fn handshake_succeeded(
        &mut self,
        attempt: u32,
        session_id: Option<&str>,
        version: ProtocolVersion,
    ) {
        if self.phase != (Phase::Initializing { attempt }) {
            return;
        }
        let session_id = session_id.and_then(|id| {
            let mut s = String::new();
            s.push_str(id).ok().map(|_| s)
        });
        self.phase = Phase::Ready(Snapshot {
            session_id,
            version,
        });
        #[cfg(any(feature = "era-2025", feature = "probe"))]
        {
            self.last_failure = None;
        }
        self.handshakes = self.handshakes.saturating_add(1);
    }

    /// Attempt `attempt` failed: back to `Fresh` (never poisoned); its waiters get `failure`.
    pub fn handshake_failed(&mut self, attempt: u32, failure: Failure) {
        if self.phase != (Phase::Initializing { attempt }) {
            return;
        }
        self.phase = Phase::Fresh;
        #[cfg(any(feature = "era-2025", feature = "probe"))]
        {
            self.last_failure = Some((attempt, failure));
        }
        #[cfg(not(any(feature = "era-2025", feature = "probe")))]
        let _ = (attempt, failure);
    }

    /// The server answered 404 to a request that carried `used_id`: if that is still the
    /// current session, forget it so the next request re-initializes (without the id).
    /// Returns true when the session was reset by this call.
    pub fn session_gone(&mut self, used_id: &str) -> bool {
        let current = self.snapshot().and_then(|s| s.id());
        if current == Some(used_id) {
            self.phase = Phase::Fresh;
            true
        } else {
            false
        }
    }

    /// Forget everything (e.g. after `close`): the next call handshakes again.
    pub fn reset(&mut self) {
        if let Phase::Ready(_) = self.phase {
            self.phase = Phase::Fresh;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference SDK's version, which sends no version header.
    fn v() -> ProtocolVersion {
        ProtocolVersion::SEED
    }

    // Session and event ids are the handshake era's (feature `era-2025`).
    #[cfg(feature = "era-2025")]
    #[test]
    fn first_caller_starts_the_others_wait_for_that_attempt() {
        let mut s = Session::new(v());
        assert_eq!(s.begin(), Begin::Start { attempt: 1 });
        assert_eq!(s.begin(), Begin::Wait { attempt: 1 });
        assert_eq!(s.outcome_of(1), None);
        s.handshake_succeeded(1, Some("abc"), ProtocolVersion::V2025_06_18);
        let snap = match s.begin() {
            Begin::Ready(snap) => snap,
            other => panic!("{other:?}"),
        };
        assert_eq!(snap.id(), Some("abc"));
        assert_eq!(snap.version_header(), Some("2025-06-18"));
        assert_eq!(s.outcome_of(1), Some(Ok(snap)));
        assert_eq!(s.handshakes(), 1);
    }

    // Session and event ids are the handshake era's (feature `era-2025`).
    #[cfg(feature = "era-2025")]
    #[test]
    fn a_failed_attempt_is_never_cached() {
        let mut s = Session::new(v());
        assert_eq!(s.begin(), Begin::Start { attempt: 1 });
        assert_eq!(s.begin(), Begin::Wait { attempt: 1 });
        s.handshake_failed(1, Failure::TimedOut);
        // The waiter of attempt 1 is handed the failure …
        assert_eq!(s.outcome_of(1), Some(Err(Failure::TimedOut)));
        // … and the next call makes a real attempt, not the stored failure.
        assert_eq!(s.begin(), Begin::Start { attempt: 2 });
        assert_eq!(s.outcome_of(1), Some(Err(Failure::TimedOut)));
        s.handshake_succeeded(2, None, v());
        assert!(matches!(
            s.begin(),
            Begin::Ready(Snapshot {
                session_id: None,
                ..
            })
        ));
        assert_eq!(s.snapshot().and_then(|s| s.version_header()), None);
    }

    #[test]
    fn stale_reports_are_ignored() {
        let mut s = Session::new(v());
        assert_eq!(s.begin(), Begin::Start { attempt: 1 });
        s.handshake_failed(1, Failure::NoResponse);
        assert_eq!(s.begin(), Begin::Start { attempt: 2 });
        s.handshake_succeeded(1, Some("old"), v());
        assert_eq!(s.phase(), &Phase::Initializing { attempt: 2 });
    }

    // Session and event ids are the handshake era's (feature `era-2025`).
    #[cfg(feature = "era-2025")]
    #[test]
    fn a_404_for_the_current_id_resets_once() {
        let mut s = Session::new(v());
        let Begin::Start { attempt } = s.begin() else {
            panic!()
        };
        s.handshake_succeeded(attempt, Some("one"), v());
        assert!(!s.session_gone("other"));
        assert!(s.session_gone("one"));
        assert!(
            !s.session_gone("one"),
            "a second 404 for the same id is not a second reset"
        );
        assert_eq!(s.begin(), Begin::Start { attempt: 2 });
    }

    #[test]
    fn an_overlong_session_id_is_not_kept_half() {
        let mut s = Session::new(v());
        let Begin::Start { attempt } = s.begin() else {
            panic!()
        };
        let long = "x".repeat(MAX_SESSION_ID + 1);
        s.handshake_succeeded(attempt, Some(&long), v());
        assert_eq!(s.snapshot().and_then(|s| s.id()), None);
    }
}
