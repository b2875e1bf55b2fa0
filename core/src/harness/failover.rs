//! Failover: which server of a slot a call goes to, and which timeline events it owes.
//!
//! Every slot is a failover slot (a primary and an optional fallback), even without a fallback.
//! This module owns the per-slot [`FailoverState`] and its pure transitions; it sends nothing and
//! emits nothing itself — the driver asks [`FailoverState::first_target`], makes the attempt, and
//! feeds the outcome to [`FailoverState::after_attempt`], whose [`Decision`] says where to go
//! next and which events to emit now.
//!
//! # Rules
//!
//! - Only an [`AttemptOutcome::Unreachable`] server is marked dead: a refusal or a tool error
//!   means the server answered.
//! - The primary is tried first while it is not known dead. An unreachable primary is marked
//!   dead for the rest of the run and the same call goes on to a live fallback; later calls go
//!   straight to the fallback without paying the primary's timeout again.
//! - A refusal for an unknown tool on the primary tries the fallback for that call without
//!   marking the primary dead.
//! - **When every server is known dead**, the next call forgets that and starts again from the
//!   primary, so a server that came back is found (a slot without a fallback whose primary is
//!   dead is such a slot).
//! - `mcp.fallback_used` is owed once per slot per run, the first time the fallback *serves*: it
//!   answers, reports a tool error, or refuses for a reason other than an unknown tool.
//! - `mcp.no_healthy_tool` is owed once per slot and tool per run, when a call ends with no
//!   server able to serve it: every server it tried was unreachable or did not know the tool
//!   (a fallback that does not know the tool has not served, so it owes no `fallback_used`).
//!   The tools already reported are remembered as 64-bit FNV-1a hashes folded to 32 bits
//!   (half the slot's memory; two of 64 names collide about once in ten million runs), up to
//!   [`MAX_REPORTED_TOOLS`]; past that the event is emitted again rather than suppressed
//!   (loud beats silent).
//! - `tools/list` ([`FailoverState::after_list_attempt`]): a primary failure retries on a live
//!   fallback; a fallback failure is returned to the caller. It owes no events.

/// How many distinct tools per slot remember that `mcp.no_healthy_tool` was emitted.
pub const MAX_REPORTED_TOOLS: usize = 64;

/// A server of a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(not(feature = "std"), repr(u32))]
pub enum Target {
    /// The slot's endpoint.
    Primary,
    /// The slot's fallback endpoint.
    Fallback,
}

/// What one attempt on one server came to (the failure shapes of docs/design.md#result-shapes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum AttemptOutcome {
    /// The tool ran and answered.
    Answered,
    /// The server reported a tool-level error (`isError: true`).
    ToolError,
    /// A JSON-RPC error; `unknown_tool` when it says the server does not have the tool.
    Refused {
        /// The error says the tool does not exist on that server.
        unknown_tool: bool,
    },
    /// Connect, TLS, HTTP status, malformed reply, stream ended early, timed out.
    Unreachable,
}

/// What to do after an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Decision {
    /// The next server to try for the same call; `None` ends the call with this attempt's result.
    pub next: Option<Target>,
    /// Emit `mcp.fallback_used` now (the first time the fallback served in this run).
    pub fallback_used: bool,
    /// Emit `mcp.no_healthy_tool` now (the first time for this slot and tool in this run).
    pub no_healthy_tool: bool,
}

/// The failover state of one slot for one run.
#[derive(Debug, Clone)]
pub struct FailoverState {
    has_fallback: bool,
    primary_dead: bool,
    fallback_dead: bool,
    fallback_announced: bool,
    reported: heapless::Vec<u32, MAX_REPORTED_TOOLS>,
}

/// FNV-1a, 64 bits: the failover's memory of reported tools, and a list's of its last
/// cursors (by hash, not by copy).
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl FailoverState {
    /// Fresh state: every server presumed alive, nothing announced.
    pub fn new(has_fallback: bool) -> Self {
        FailoverState {
            has_fallback,
            primary_dead: false,
            fallback_dead: false,
            fallback_announced: false,
            reported: heapless::Vec::new(),
        }
    }

    /// The slot has a fallback server.
    pub fn has_fallback(&self) -> bool {
        self.has_fallback
    }

    /// The primary was unreachable and has not been retried since.
    pub fn primary_dead(&self) -> bool {
        self.primary_dead
    }

    /// The fallback was unreachable and has not been retried since.
    pub fn fallback_dead(&self) -> bool {
        self.fallback_dead
    }

    /// `target` was unreachable and has not been retried since (nothing is sent to it).
    pub fn is_dead(&self, target: Target) -> bool {
        match target {
            Target::Primary => self.primary_dead,
            Target::Fallback => self.fallback_dead,
        }
    }

    /// `mcp.fallback_used` was already owed in this run.
    pub fn fallback_announced(&self) -> bool {
        self.fallback_announced
    }

    fn fallback_alive(&self) -> bool {
        self.has_fallback && !self.fallback_dead
    }

    /// Where a new call (or listing) starts: the primary unless it is known dead and a live
    /// fallback exists. When every server is known dead, forgets that and starts again from the
    /// primary, so a server that came back is found.
    pub fn first_target(&mut self) -> Target {
        if !self.primary_dead {
            return Target::Primary;
        }
        if self.fallback_alive() {
            return Target::Fallback;
        }
        self.primary_dead = false;
        self.fallback_dead = false;
        Target::Primary
    }

    fn mark_dead(&mut self, target: Target) {
        match target {
            Target::Primary => self.primary_dead = true,
            Target::Fallback => self.fallback_dead = true,
        }
    }

    /// True the first time `tool` is reported (or when the memory is full).
    fn first_report(&mut self, tool: &str) -> bool {
        let h = fnv1a(tool.as_bytes());
        let h = (h ^ (h >> 32)) as u32;
        if self.reported.contains(&h) {
            return false;
        }
        // Full: report again rather than stay silent.
        let _ = self.reported.push(h);
        true
    }

    /// Folds the outcome of an attempt of `tool` on `target` into the state.
    pub fn after_attempt(
        &mut self,
        target: Target,
        outcome: AttemptOutcome,
        tool: &str,
    ) -> Decision {
        let served = matches!(
            outcome,
            AttemptOutcome::Answered
                | AttemptOutcome::ToolError
                | AttemptOutcome::Refused {
                    unknown_tool: false
                }
        );
        if outcome == AttemptOutcome::Unreachable {
            self.mark_dead(target);
        }
        if served {
            let fallback_used = target == Target::Fallback && !self.fallback_announced;
            if fallback_used {
                self.fallback_announced = true;
            }
            return Decision {
                next: None,
                fallback_used,
                no_healthy_tool: false,
            };
        }
        // Unreachable, or the tool is unknown here.
        if target == Target::Primary && self.fallback_alive() {
            return Decision {
                next: Some(Target::Fallback),
                ..Decision::default()
            };
        }
        Decision {
            next: None,
            fallback_used: false,
            no_healthy_tool: self.first_report(tool),
        }
    }

    /// Folds the outcome of a `tools/list` attempt: `Some(Fallback)` retries a primary failure
    /// on a live fallback; `None` returns this attempt's result (a listing, or the fallback's
    /// failure). [`AttemptOutcome::Answered`] is a listing; anything else a failure.
    pub fn after_list_attempt(
        &mut self,
        target: Target,
        outcome: AttemptOutcome,
    ) -> Option<Target> {
        if outcome == AttemptOutcome::Unreachable {
            self.mark_dead(target);
        }
        if outcome != AttemptOutcome::Answered && target == Target::Primary && self.fallback_alive()
        {
            return Some(Target::Fallback);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::AttemptOutcome::*;
    use super::Target::*;
    use super::*;

    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Fb {
        NoFallback,
        Alive,
        Dead,
    }
    use Fb::*;

    const UNKNOWN: AttemptOutcome = Refused { unknown_tool: true };
    const REFUSED: AttemptOutcome = Refused {
        unknown_tool: false,
    };

    fn state(primary_dead: bool, fb: Fb) -> FailoverState {
        let mut s = FailoverState::new(fb != NoFallback);
        s.primary_dead = primary_dead;
        s.fallback_dead = fb == Dead;
        s
    }

    /// One row: start state, the first attempt's outcome, and what must follow from it.
    struct Row {
        primary_dead: bool,
        fb: Fb,
        outcome: AttemptOutcome,
        first: Target,
        next: Option<Target>,
        fallback_used: bool,
        no_healthy: bool,
        /// (primary dead, fallback dead) after the attempt.
        after: (bool, bool),
    }

    #[rustfmt::skip]
    #[allow(clippy::too_many_arguments)] // one argument per column of the table
    fn r(primary_dead: bool, fb: Fb, outcome: AttemptOutcome, first: Target, next: Option<Target>,
         fallback_used: bool, no_healthy: bool, after: (bool, bool)) -> Row {
        Row { primary_dead, fb, outcome, first, next, fallback_used, no_healthy, after }
    }

    /// The decision table: primary alive/dead × fallback none/alive/dead × outcome, for the
    /// first attempt of a call. Every row is explicit.
    #[test]
    #[rustfmt::skip]
    fn decision_table_first_attempt() {
        const A: bool = false; // alive
        const D: bool = true;  // dead
        let rows = [
            //   primary fallback    outcome     first     next            fb_used no_healthy (p dead, f dead) after
            // primary alive, no fallback
            r(A, NoFallback, Answered,   Primary,  None,           false, false, (A, A)),
            r(A, NoFallback, ToolError,  Primary,  None,           false, false, (A, A)),
            r(A, NoFallback, REFUSED,    Primary,  None,           false, false, (A, A)),
            r(A, NoFallback, UNKNOWN,    Primary,  None,           false, true,  (A, A)),
            r(A, NoFallback, Unreachable,Primary,  None,           false, true,  (D, A)),
            // primary alive, fallback alive
            r(A, Alive,      Answered,   Primary,  None,           false, false, (A, A)),
            r(A, Alive,      ToolError,  Primary,  None,           false, false, (A, A)),
            r(A, Alive,      REFUSED,    Primary,  None,           false, false, (A, A)),
            r(A, Alive,      UNKNOWN,    Primary,  Some(Fallback), false, false, (A, A)),
            r(A, Alive,      Unreachable,Primary,  Some(Fallback), false, false, (D, A)),
            // primary alive, fallback dead
            r(A, Dead,       Answered,   Primary,  None,           false, false, (A, D)),
            r(A, Dead,       ToolError,  Primary,  None,           false, false, (A, D)),
            r(A, Dead,       REFUSED,    Primary,  None,           false, false, (A, D)),
            r(A, Dead,       UNKNOWN,    Primary,  None,           false, true,  (A, D)),
            r(A, Dead,       Unreachable,Primary,  None,           false, true,  (D, D)),
            // primary dead, no fallback: every server dead, so start again from the primary
            r(D, NoFallback, Answered,   Primary,  None,           false, false, (A, A)),
            r(D, NoFallback, ToolError,  Primary,  None,           false, false, (A, A)),
            r(D, NoFallback, REFUSED,    Primary,  None,           false, false, (A, A)),
            r(D, NoFallback, UNKNOWN,    Primary,  None,           false, true,  (A, A)),
            r(D, NoFallback, Unreachable,Primary,  None,           false, true,  (D, A)),
            // primary dead, fallback alive: straight to the fallback
            r(D, Alive,      Answered,   Fallback, None,           true,  false, (D, A)),
            r(D, Alive,      ToolError,  Fallback, None,           true,  false, (D, A)),
            r(D, Alive,      REFUSED,    Fallback, None,           true,  false, (D, A)),
            r(D, Alive,      UNKNOWN,    Fallback, None,           false, true,  (D, A)),
            r(D, Alive,      Unreachable,Fallback, None,           false, true,  (D, D)),
            // primary dead, fallback dead: every server dead, start again from the primary
            r(D, Dead,       Answered,   Primary,  None,           false, false, (A, A)),
            r(D, Dead,       ToolError,  Primary,  None,           false, false, (A, A)),
            r(D, Dead,       REFUSED,    Primary,  None,           false, false, (A, A)),
            r(D, Dead,       UNKNOWN,    Primary,  Some(Fallback), false, false, (A, A)),
            r(D, Dead,       Unreachable,Primary,  Some(Fallback), false, false, (D, A)),
        ];
        assert_eq!(rows.len(), 2 * 3 * 5);
        for (i, row) in rows.iter().enumerate() {
            let mut s = state(row.primary_dead, row.fb);
            let first = s.first_target();
            assert_eq!(first, row.first, "row {i}: first target");
            let d = s.after_attempt(first, row.outcome, "run_command");
            assert_eq!(d.next, row.next, "row {i}: next");
            assert_eq!(d.fallback_used, row.fallback_used, "row {i}: fallback_used");
            assert_eq!(d.no_healthy_tool, row.no_healthy, "row {i}: no_healthy_tool");
            assert_eq!((s.primary_dead(), s.fallback_dead()), row.after, "row {i}: state");
            assert_eq!(s.fallback_announced(), row.fallback_used, "row {i}: announced");
        }
    }

    /// The second attempt of a call the primary passed on (unreachable or unknown tool).
    #[test]
    #[rustfmt::skip]
    fn decision_table_fallback_after_primary() {
        let rows = [
            // primary outcome, fallback outcome, fb_used, no_healthy, (p dead, f dead) after
            (Unreachable, Answered,    true,  false, (true,  false)),
            (Unreachable, ToolError,   true,  false, (true,  false)),
            (Unreachable, REFUSED,     true,  false, (true,  false)),
            (Unreachable, UNKNOWN,     false, true,  (true,  false)),
            (Unreachable, Unreachable, false, true,  (true,  true)),
            (UNKNOWN,     Answered,    true,  false, (false, false)),
            (UNKNOWN,     ToolError,   true,  false, (false, false)),
            (UNKNOWN,     REFUSED,     true,  false, (false, false)),
            (UNKNOWN,     UNKNOWN,     false, true,  (false, false)),
            (UNKNOWN,     Unreachable, false, true,  (false, true)),
        ];
        for (i, &(p, f, used, nh, after)) in rows.iter().enumerate() {
            let mut s = FailoverState::new(true);
            assert_eq!(s.first_target(), Primary);
            assert_eq!(s.after_attempt(Primary, p, "t").next, Some(Fallback), "row {i}");
            let d = s.after_attempt(Fallback, f, "t");
            assert_eq!(d, Decision { next: None, fallback_used: used, no_healthy_tool: nh }, "row {i}");
            assert_eq!((s.primary_dead(), s.fallback_dead()), after, "row {i}");
        }
    }

    #[test]
    fn later_calls_go_straight_to_the_fallback_and_announce_once() {
        let mut s = FailoverState::new(true);
        let t = s.first_target();
        assert_eq!(s.after_attempt(t, Unreachable, "a").next, Some(Fallback));
        assert!(s.after_attempt(Fallback, Answered, "a").fallback_used);
        for tool in ["a", "b", "c"] {
            assert_eq!(s.first_target(), Fallback);
            let d = s.after_attempt(Fallback, Answered, tool);
            assert_eq!(d, Decision::default());
        }
    }

    #[test]
    fn no_healthy_tool_once_per_tool() {
        let mut s = FailoverState::new(false);
        let t = s.first_target();
        assert!(s.after_attempt(t, UNKNOWN, "nikto").no_healthy_tool);
        let t = s.first_target();
        assert!(!s.after_attempt(t, UNKNOWN, "nikto").no_healthy_tool);
        let t = s.first_target();
        assert!(!s.after_attempt(t, Unreachable, "nikto").no_healthy_tool);
        let t = s.first_target();
        assert!(s.after_attempt(t, Unreachable, "nmap").no_healthy_tool);
    }

    #[test]
    fn past_the_memory_it_reports_again() {
        let mut s = FailoverState::new(false);
        for i in 0..MAX_REPORTED_TOOLS {
            let tool = std::format!("tool{i}");
            assert!(s.after_attempt(Primary, UNKNOWN, &tool).no_healthy_tool);
            assert!(!s.after_attempt(Primary, UNKNOWN, &tool).no_healthy_tool);
        }
        assert!(
            s.after_attempt(Primary, UNKNOWN, "one-more")
                .no_healthy_tool
        );
        assert!(
            s.after_attempt(Primary, UNKNOWN, "one-more")
                .no_healthy_tool
        );
    }

    #[test]
    fn a_server_that_came_back_is_found() {
        let mut s = FailoverState::new(true);
        assert_eq!(
            s.after_attempt(Primary, Unreachable, "t").next,
            Some(Fallback)
        );
        assert_eq!(s.after_attempt(Fallback, Unreachable, "t").next, None);
        // Both dead: the next call starts from the primary again, which now answers.
        assert_eq!(s.first_target(), Primary);
        assert_eq!(s.after_attempt(Primary, Answered, "t"), Decision::default());
        assert!(!s.primary_dead() && !s.fallback_dead());
    }

    #[test]
    fn list_tools_policy() {
        // (primary_dead, fallback, target outcome) → next, state after.
        let mut s = FailoverState::new(true);
        assert_eq!(s.after_list_attempt(Primary, Answered), None);
        assert_eq!(s.after_list_attempt(Primary, REFUSED), Some(Fallback));
        assert!(!s.primary_dead());
        assert_eq!(s.after_list_attempt(Primary, Unreachable), Some(Fallback));
        assert!(s.primary_dead());
        assert_eq!(s.after_list_attempt(Fallback, REFUSED), None);
        assert_eq!(s.after_list_attempt(Fallback, Unreachable), None);
        assert!(s.fallback_dead());
        // No fallback: a primary failure is returned.
        let mut s = FailoverState::new(false);
        assert_eq!(s.after_list_attempt(Primary, Unreachable), None);
        // Dead fallback: not retried.
        let mut s = state(false, Dead);
        assert_eq!(s.after_list_attempt(Primary, REFUSED), None);
        // Listing never announces.
        let mut s = FailoverState::new(true);
        assert_eq!(s.after_list_attempt(Fallback, Answered), None);
        assert!(!s.fallback_announced());
    }
}
