//! The server's own words: log messages (`notifications/message`) a server sends on a call's
//! stream or its GET stream, at or above [`Options::server_log_level`](crate::Options), kept
//! in the run log as `log: [LEVEL] SLOT/TOOL (LOGGER): DATA`, redacted, and handed to
//! [`Options::on_server_log`](crate::Options) as they come.
//!
//! Owns: the line's form, its redaction and the cap on how many a run keeps (a server that
//! floods logs cannot grow the run log without bound). Progress stays a progress observer's.

use std::sync::atomic::Ordering;

use verifi_mcp_core::machine::{LogLevel, MAX_LOG_MESSAGE};

use crate::run::{lock, redact_string};
use crate::slot::SlotHandle;

pub use crate::options::ServerLogObserver;

/// Most server log lines one run keeps; the next says the rest are dropped.
pub const MAX_SERVER_LOG_LINES: usize = 1000;

impl SlotHandle {
    /// Keeps one server log message (of a call of `tool`, or of the GET stream: `None`).
    pub(crate) fn server_log(
        &self,
        tool: Option<&str>,
        level: LogLevel,
        logger: Option<&str>,
        data: &str,
    ) {
        let run = &self.inner.run;
        if level < run.options.server_log_level {
            return;
        }
        let n = run.server_logs.fetch_add(1, Ordering::Relaxed);
        let line = if n < MAX_SERVER_LOG_LINES {
            let logger = logger.map(|l| format!(" ({l})")).unwrap_or_default();
            format!(
                "log: [{}] {}/{}{logger}: {data}",
                level.as_str(),
                self.inner.spec.slot,
                tool.unwrap_or("-"),
            )
        } else if n == MAX_SERVER_LOG_LINES {
            format!(
                "log: more than {MAX_SERVER_LOG_LINES} server log messages: the rest are dropped"
            )
        } else {
            return;
        };
        let line = redact_string(&line, &self.secrets_now());
        if let Some(o) = &run.options.on_server_log {
            (o.0)(&line);
        }
        lock(&run.records.log).push(line);
    }

    /// A message on the GET stream: kept when it is a log message.
    pub(crate) fn server_log_json(&self, msg: &[u8]) {
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(msg) else {
            return;
        };
        if v["method"] != "notifications/message" {
            return;
        }
        let params = &v["params"];
        let level = params["level"]
            .as_str()
            .and_then(LogLevel::parse)
            .unwrap_or(LogLevel::Debug);
        let mut data = match &params["data"] {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        if data.len() > MAX_LOG_MESSAGE {
            let mut cut = MAX_LOG_MESSAGE;
            while !data.is_char_boundary(cut) {
                cut -= 1;
            }
            data.truncate(cut);
        }
        self.server_log(None, level, params["logger"].as_str(), &data);
    }
}
