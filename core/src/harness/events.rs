//! The run timeline: events as plain values with a stable JSON form, and the [`Timeline`] trait
//! they are emitted to.
//!
//! Owns the three events of the run timeline (docs/design.md#timeline) — `tool_error` for every `ok: false`,
//! `mcp.fallback_used` once per slot per run, `mcp.no_healthy_tool` once per slot and tool per
//! run (the once-rules live in `failover`). Where the timeline goes is the host's business.

use crate::buf::{Overflow, Sink};
use crate::wire::json::write_str_literal;

/// One event on the run timeline. Every string is borrowed from the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum TimelineEvent<'a> {
    /// A call returned `ok: false`.
    ToolError {
        /// The slot called.
        slot: &'a str,
        /// The tool called.
        tool: &'a str,
        /// The (redacted) error of the result.
        error: &'a str,
    },
    /// The fallback served this slot for the first time in the run.
    FallbackUsed {
        /// The slot.
        slot: &'a str,
        /// The tool the fallback served.
        tool: &'a str,
        /// The primary endpoint, as in the manifest.
        primary: &'a str,
        /// The fallback endpoint, as in the manifest.
        fallback: &'a str,
    },
    /// No server of the slot could serve this tool: re-plan around a missing capability.
    NoHealthyTool {
        /// The slot.
        slot: &'a str,
        /// The tool.
        tool: &'a str,
    },
    /// Which era a server speaks, found by its probe (or forced): once per server per run.
    Era {
        /// The slot.
        slot: &'a str,
        /// The tool whose call found it.
        tool: &'a str,
        /// The server's endpoint, as in the manifest.
        server: &'a str,
        /// `2026-07-28`, or `legacy` (the handshake era).
        era: &'a str,
    },
    /// A call ran as a task (the tasks extension): once when it became one (`status`
    /// `working`), once at its end (`completed`, `failed`, `cancelled`, `timedOut`, `gone`,
    /// `lost`, `inputRequired`).
    Task {
        /// The slot.
        slot: &'a str,
        /// The tool called.
        tool: &'a str,
        /// The task's id.
        task: &'a str,
        /// Where the task stands.
        status: &'a str,
    },
}

impl TimelineEvent<'_> {
    /// The event's name on the timeline: `tool_error`, `mcp.fallback_used`,
    /// `mcp.no_healthy_tool`.
    pub fn kind(&self) -> &'static str {
        match self {
            TimelineEvent::ToolError { .. } => "tool_error",
            TimelineEvent::FallbackUsed { .. } => "mcp.fallback_used",
            TimelineEvent::NoHealthyTool { .. } => "mcp.no_healthy_tool",
            TimelineEvent::Era { .. } => "mcp.era",
            TimelineEvent::Task { .. } => "mcp.task",
        }
    }

    /// The stable JSON form: `{"kind":…,"slot":…,"tool":…}` followed by `"error"` or
    /// `"primary"`, `"fallback"`, in that order, strings escaped as JSON.
    pub fn write_json(&self, out: &mut impl Sink) -> Result<(), Overflow> {
        out.put(b"{\"kind\":")?;
        write_str_literal(out, self.kind())?;
        let (slot, tool) = match *self {
            TimelineEvent::ToolError { slot, tool, .. }
            | TimelineEvent::FallbackUsed { slot, tool, .. }
            | TimelineEvent::NoHealthyTool { slot, tool }
            | TimelineEvent::Era { slot, tool, .. }
            | TimelineEvent::Task { slot, tool, .. } => (slot, tool),
        };
        field(out, "slot", slot)?;
        field(out, "tool", tool)?;
        match *self {
            TimelineEvent::ToolError { error, .. } => field(out, "error", error)?,
            TimelineEvent::FallbackUsed {
                primary, fallback, ..
            } => {
                field(out, "primary", primary)?;
                field(out, "fallback", fallback)?;
            }
            TimelineEvent::NoHealthyTool { .. } => {}
            TimelineEvent::Era { server, era, .. } => {
                field(out, "server", server)?;
                field(out, "era", era)?;
            }
            TimelineEvent::Task { task, status, .. } => {
                field(out, "task", task)?;
                field(out, "status", status)?;
            }
        }
        out.put(b"}")
    }
}

fn field(out: &mut impl Sink, name: &str, value: &str) -> Result<(), Overflow> {
    out.put(b",")?;
    write_str_literal(out, name)?;
    out.put(b":")?;
    write_str_literal(out, value)
}

/// Where timeline events go.
pub trait Timeline {
    /// Records one event.
    fn emit(&mut self, e: &TimelineEvent<'_>);
    /// Records a failed call's `tool_error`; `answered`: a server answered it (a tool error
    /// or a refusal), else no server did (or the call never went out). A sink that adds to
    /// the error of an unanswered call decides by this, never by the error's text. The
    /// default records it as any event.
    fn emit_failure(&mut self, e: &TimelineEvent<'_>, answered: bool) {
        let _ = answered;
        self.emit(e);
    }
}

impl<T: Timeline + ?Sized> Timeline for &mut T {
    fn emit(&mut self, e: &TimelineEvent<'_>) {
        (**self).emit(e)
    }
    fn emit_failure(&mut self, e: &TimelineEvent<'_>, answered: bool) {
        (**self).emit_failure(e, answered)
    }
}

/// A timeline that drops every event.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoTimeline;

impl Timeline for NoTimeline {
    fn emit(&mut self, _: &TimelineEvent<'_>) {}
}

/// A timeline that counts events by kind (tests, and a cheap summary on the edge).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CountingTimeline {
    /// `tool_error` events.
    pub tool_errors: u32,
    /// `mcp.fallback_used` events.
    pub fallback_used: u32,
    /// `mcp.no_healthy_tool` events.
    pub no_healthy_tool: u32,
    /// `mcp.era` events.
    pub era: u32,
    /// `mcp.task` events.
    pub task: u32,
}

impl Timeline for CountingTimeline {
    fn emit(&mut self, e: &TimelineEvent<'_>) {
        let n = match e {
            TimelineEvent::ToolError { .. } => &mut self.tool_errors,
            TimelineEvent::FallbackUsed { .. } => &mut self.fallback_used,
            TimelineEvent::NoHealthyTool { .. } => &mut self.no_healthy_tool,
            TimelineEvent::Era { .. } => &mut self.era,
            TimelineEvent::Task { .. } => &mut self.task,
        };
        *n = n.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::{Buf, SliceBuf};
    use proptest::prelude::*;
    use std::string::String;

    fn json(e: &TimelineEvent<'_>) -> String {
        let mut storage = [0u8; 256];
        let mut b = SliceBuf::new(&mut storage);
        e.write_json(&mut b).unwrap();
        String::from_utf8(b.bytes().to_vec()).unwrap()
    }

    #[test]
    fn kinds() {
        let e = TimelineEvent::ToolError {
            slot: "s",
            tool: "t",
            error: "e",
        };
        assert_eq!(e.kind(), "tool_error");
        let f = TimelineEvent::FallbackUsed {
            slot: "s",
            tool: "t",
            primary: "p",
            fallback: "f",
        };
        assert_eq!(f.kind(), "mcp.fallback_used");
        let n = TimelineEvent::NoHealthyTool {
            slot: "s",
            tool: "t",
        };
        assert_eq!(n.kind(), "mcp.no_healthy_tool");
    }

    #[test]
    fn stable_json_forms() {
        assert_eq!(
            json(&TimelineEvent::FallbackUsed {
                slot: "kali",
                tool: "run_command",
                primary: "http://10.0.0.5:8080",
                fallback: "http://10.0.0.6:8080",
            }),
            r#"{"kind":"mcp.fallback_used","slot":"kali","tool":"run_command","primary":"http://10.0.0.5:8080","fallback":"http://10.0.0.6:8080"}"#
        );
        assert_eq!(
            json(&TimelineEvent::NoHealthyTool {
                slot: "kali",
                tool: "nikto"
            }),
            r#"{"kind":"mcp.no_healthy_tool","slot":"kali","tool":"nikto"}"#
        );
        assert_eq!(
            json(&TimelineEvent::ToolError {
                slot: "kali",
                tool: "nmap",
                error: "tool call timed out",
            }),
            r#"{"kind":"tool_error","slot":"kali","tool":"nmap","error":"tool call timed out"}"#
        );
    }

    #[test]
    fn strings_are_escaped() {
        let s = json(&TimelineEvent::ToolError {
            slot: "k\"a",
            tool: "t\\",
            error: "line1\nline2\u{1}",
        });
        assert_eq!(
            s,
            r#"{"kind":"tool_error","slot":"k\"a","tool":"t\\","error":"line1\nline2\u0001"}"#
        );
    }

    #[test]
    fn overflow_is_a_value() {
        let mut storage = [0u8; 10];
        let e = TimelineEvent::NoHealthyTool {
            slot: "kali",
            tool: "nikto",
        };
        assert!(e.write_json(&mut SliceBuf::new(&mut storage)).is_err());
    }

    #[test]
    fn counting_and_noop() {
        let mut c = CountingTimeline::default();
        let mut n = NoTimeline;
        let events = [
            TimelineEvent::ToolError {
                slot: "s",
                tool: "t",
                error: "e",
            },
            TimelineEvent::ToolError {
                slot: "s",
                tool: "u",
                error: "e",
            },
            TimelineEvent::NoHealthyTool {
                slot: "s",
                tool: "t",
            },
        ];
        fn send(mut t: impl Timeline, e: &TimelineEvent<'_>) {
            t.emit(e);
        }
        for e in &events {
            send(&mut c, e);
            n.emit(e);
        }
        assert_eq!(
            c,
            CountingTimeline {
                tool_errors: 2,
                fallback_used: 0,
                no_healthy_tool: 1,
                era: 0,
                task: 0
            }
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn json_form_parses_back(slot in any::<String>(), tool in any::<String>(), a in any::<String>(), b in any::<String>()) {
            let e = TimelineEvent::FallbackUsed { slot: &slot, tool: &tool, primary: &a, fallback: &b };
            let mut storage = std::vec![0u8; 8 * (slot.len() + tool.len() + a.len() + b.len()) + 128];
            let mut out = SliceBuf::new(&mut storage);
            e.write_json(&mut out).unwrap();
            let v = crate::wire::json::Value::parse(out.bytes(), Default::default()).unwrap();
            let names: std::vec::Vec<&[u8]> = v.members().map(|(k, _)| k.raw()).collect();
            prop_assert_eq!(names, [&b"kind"[..], b"slot", b"tool", b"primary", b"fallback"]);
            for (k, want) in [("kind", "mcp.fallback_used"), ("slot", &slot), ("tool", &tool), ("primary", &a), ("fallback", &b)] {
                prop_assert!(v.get(k).unwrap().as_str().unwrap().eq_str(want));
            }
        }
    }
}
