//! The `run_command` helpers for a shared Kali-style exec box: the timeout clamp, the
//! arguments, and unwrapping `$ <cmd>\n(exit <N>)\n<output>` so a harness uses the *tool's*
//! exit code, not the MCP call's success.
//!
//! Owns no call: the driver sends the arguments built here and hands the result back to
//! [`exec_outcome`].

use crate::buf::{Overflow, Sink, put_u64};
use crate::wire::json::write_str_literal;

/// Server-side ceiling for a command, in seconds: under the client's 300 s call timeout, so the
/// box kills a long tool and the call still returns its output (coverage capped, not lost).
pub const MCP_CALL_CEILING_S: u32 = 285;

/// The exec tool's name.
pub const RUN_COMMAND: &str = "run_command";

/// A harness's timeout in milliseconds as the tool's `timeout` in seconds: rounded up, then
/// clamped to `1..=`[`MCP_CALL_CEILING_S`].
pub fn clamp_timeout_s(timeout_ms: u64) -> u32 {
    // At or past the ceiling at once; below it in 32 bits (no 64-bit division on the edge).
    match u32::try_from(timeout_ms) {
        Ok(ms) if ms <= MCP_CALL_CEILING_S * 1000 => ms.div_ceil(1000).max(1),
        _ => MCP_CALL_CEILING_S,
    }
}

/// Writes the `run_command` arguments `{"command":…,"timeout":N,"workspace":…}`. The workspace
/// is always the run id: it keeps one run from reading another's output on the shared disk.
pub fn encode_run_command_args(
    out: &mut impl Sink,
    command: &str,
    timeout_s: u32,
    workspace: &str,
) -> Result<(), Overflow> {
    out.put(b"{\"command\":")?;
    write_str_literal(out, command)?;
    out.put(b",\"timeout\":")?;
    put_u64(out, u64::from(timeout_s))?;
    out.put(b",\"workspace\":")?;
    write_str_literal(out, workspace)?;
    out.put(b"}")
}

/// Matches `^\$ [^\n]*\n\(exit (-?\d+)\)\n([\s\S]*)$` and gives `(exit code, output)`.
///
/// Negative codes and empty output are fine. A code too large for `i64` saturates (it is still
/// non-zero, so still a failure).
pub fn unwrap_run_command(text: &str) -> Option<(i64, &str)> {
    let rest = text.strip_prefix("$ ")?;
    // The command line's end by a byte search (no pattern searcher for it on the edge).
    let rest = rest.get(rest.bytes().position(|b| b == b'\n')? + 1..)?;
    let rest = rest.strip_prefix("(exit ")?;
    let (code, output) = crate::buf::split_once_str(rest, ")\n")?;
    let (negative, digits) = match code.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, code),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let magnitude = digits.bytes().fold(0i64, |n, b| {
        n.saturating_mul(10).saturating_add(i64::from(b - b'0'))
    });
    let code = if negative {
        magnitude.saturating_neg()
    } else {
        magnitude
    };
    Some((code, output))
}

/// What an `exec` returns to the harness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ExecOutcome<'a> {
    /// The tool's output (unwrapped), or the raw text or error when it did not unwrap.
    pub output: &'a str,
    /// The tool's exit code was 0; without an exit code, the MCP call's own success.
    pub ok: bool,
    /// The tool's exit code, when the reply had the `run_command` form.
    pub exit_code: Option<i64>,
}

/// The seed's usage pattern: `raw = ok ? text : (error ?? "run_command failed")`, unwrapped when
/// it has the `run_command` form (then `ok` is `exit == 0`), else passed through with `call_ok`.
pub fn exec_outcome<'a>(call_ok: bool, text: &'a str, error: Option<&'a str>) -> ExecOutcome<'a> {
    let raw = if call_ok {
        text
    } else {
        error.unwrap_or("run_command failed")
    };
    match unwrap_run_command(raw) {
        Some((code, output)) => ExecOutcome {
            output,
            ok: code == 0,
            exit_code: Some(code),
        },
        None => ExecOutcome {
            output: raw,
            ok: call_ok,
            exit_code: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::{Buf, SliceBuf};
    use proptest::prelude::*;

    #[test]
    fn clamp() {
        let cases = [
            (0u64, 1u32),
            (1, 1),
            (999, 1),
            (1000, 1),
            (1001, 2),
            (30_000, 30),
            (284_001, 285),
            (285_000, 285),
            (300_000, 285),
            (u64::MAX, 285),
        ];
        for (ms, s) in cases {
            assert_eq!(clamp_timeout_s(ms), s, "{ms} ms");
        }
    }

    #[test]
    fn args() {
        let mut storage = [0u8; 128];
        let mut b = SliceBuf::new(&mut storage);
        encode_run_command_args(&mut b, "nmap -sV \"example.com\"", 285, "run-42").unwrap();
        assert_eq!(
            b.bytes(),
            br#"{"command":"nmap -sV \"example.com\"","timeout":285,"workspace":"run-42"}"#
        );
        let mut small = [0u8; 16];
        assert!(encode_run_command_args(&mut SliceBuf::new(&mut small), "ls", 1, "r").is_err());
    }

    #[test]
    fn unwrap_forms() {
        assert_eq!(
            unwrap_run_command("$ nmap -sV x\n(exit 0)\n22/tcp open\n"),
            Some((0, "22/tcp open\n"))
        );
        assert_eq!(unwrap_run_command("$ false\n(exit 1)\n"), Some((1, "")));
        assert_eq!(
            unwrap_run_command("$ kill\n(exit -9)\nKilled"),
            Some((-9, "Killed"))
        );
        assert_eq!(unwrap_run_command("$ \n(exit 0)\na\nb"), Some((0, "a\nb")));
        assert_eq!(
            unwrap_run_command("$ x\n(exit 99999999999999999999999)\n"),
            Some((i64::MAX, ""))
        );
        for bad in [
            "",
            "nmap output",
            "$ x",
            "$ x\n(exit 0)",
            "$ x\n(exit )\n",
            "$ x\n(exit -)\n",
            "$ x\n(exit --1)\n",
            "$ x\n(exit 1a)\n",
            "$x\n(exit 0)\n",
            " $ x\n(exit 0)\n",
            "$ x\nline\n(exit 0)\n",
            "$ x\n(exit 0) \n",
        ] {
            assert_eq!(unwrap_run_command(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn outcome_uses_the_tools_exit_code() {
        assert_eq!(
            exec_outcome(true, "$ ls\n(exit 0)\nfile\n", None),
            ExecOutcome {
                output: "file\n",
                ok: true,
                exit_code: Some(0)
            }
        );
        // The MCP call succeeded, the tool failed.
        assert_eq!(
            exec_outcome(true, "$ nikto\n(exit 2)\nerr", None),
            ExecOutcome {
                output: "err",
                ok: false,
                exit_code: Some(2)
            }
        );
        // Not the run_command form: passes through with the call's success.
        assert_eq!(
            exec_outcome(true, "plain", None),
            ExecOutcome {
                output: "plain",
                ok: true,
                exit_code: None
            }
        );
        // Failed call: the error is the raw text.
        assert_eq!(
            exec_outcome(false, "ignored", Some("tool call timed out")),
            ExecOutcome {
                output: "tool call timed out",
                ok: false,
                exit_code: None
            }
        );
        assert_eq!(
            exec_outcome(false, "", None),
            ExecOutcome {
                output: "run_command failed",
                ok: false,
                exit_code: None
            }
        );
        // A failed call whose error carries the form is unwrapped too (as the reference SDK's pattern does: docs/design.md#exec).
        assert_eq!(
            exec_outcome(false, "", Some("$ x\n(exit 0)\nout")),
            ExecOutcome {
                output: "out",
                ok: true,
                exit_code: Some(0)
            }
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn wrapped_output_round_trips(cmd in "[^\n]*", code in any::<i64>(), output in any::<String>()) {
            let text = std::format!("$ {cmd}\n(exit {code})\n{output}");
            prop_assert_eq!(unwrap_run_command(&text), Some((code, output.as_str())));
            let o = exec_outcome(false, "", Some(&text));
            prop_assert_eq!(o.ok, code == 0);
        }

        #[test]
        fn anything_else_passes_through(text in any::<String>()) {
            // Never panics; when it unwraps, the output is a suffix of the text.
            let o = exec_outcome(true, &text, None);
            match unwrap_run_command(&text) {
                Some((_, out)) => prop_assert!(text.ends_with(out) && text.starts_with("$ ")),
                None => prop_assert_eq!(o, ExecOutcome { output: text.as_str(), ok: true, exit_code: None }),
            }
        }

        #[test]
        fn args_are_valid_json(cmd in any::<String>(), t in any::<u32>(), ws in any::<String>()) {
            let mut storage = std::vec![0u8; 8 * (cmd.len() + ws.len()) + 64];
            let mut b = SliceBuf::new(&mut storage);
            encode_run_command_args(&mut b, &cmd, t, &ws).unwrap();
            let v = crate::wire::json::Value::parse(b.bytes(), Default::default()).unwrap();
            prop_assert!(v.get("command").unwrap().as_str().unwrap().eq_str(&cmd));
            prop_assert_eq!(v.get("timeout").unwrap().as_u64(), Some(u64::from(t)));
            prop_assert!(v.get("workspace").unwrap().as_str().unwrap().eq_str(&ws));
        }
    }
}
