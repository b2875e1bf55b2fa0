//! Courtesies of a dropped call (`notifications/cancelled`, `tasks/cancel`) and a task's
//! requests.

use super::*;

impl SlotHandle {
    /// Tells the server, best effort and off the caller's task, that a dropped call's
    /// `tools/call` is cancelled.
    pub(super) fn cancel_dropped(
        &self,
        request: (verifi_mcp_core::harness::failover::Target, u64),
    ) {
        let slot = self.clone();
        // The caller's future is gone and its executor unknown: a short-lived thread sends
        // the notification on its own 1 s deadline (the core's courtesy timeout).
        let sent = std::thread::Builder::new()
            .name("mcp-cancel".into())
            .spawn(move || {
                async_io::block_on(async {
                    let Ok(endpoints) = slot.endpoints() else {
                        return;
                    };
                    // An OAuth slot's notification carries the token held (never a new one).
                    let authorization = slot.held_authorization();
                    let headers = slot.headers_with(&authorization);
                    let cfg = slot.config(endpoints, &headers);
                    let Ok(net) = slot.net() else {
                        return;
                    };
                    let mut scratch = slot.scratch();
                    let mut bufs = slot.bufs(scratch.get());
                    drive::Driver::new(&net, &cfg, |f| slot.inner.state.with(f))
                        .cancel_dropped(request, &mut bufs)
                        .await;
                })
            });
        self.keep_courtesy(sent);
    }

    /// Keeps a courtesy thread's handle for [`close`](Self::close) (finished ones are let go).
    pub(super) fn keep_courtesy(&self, sent: std::io::Result<std::thread::JoinHandle<()>>) {
        if let Ok(h) = sent {
            let mut all = lock(&self.inner.courtesy);
            all.retain(|t| !t.is_finished());
            all.push(h);
        }
    }

    /// Waits (at most [`COURTESY_WAIT`]) for the cancellations of dropped calls to be sent,
    /// so they reach the server before its session ends or its process is closed.
    pub(super) async fn courtesy_sent(&self) {
        let deadline = std::time::Instant::now() + COURTESY_WAIT;
        loop {
            let left = {
                let mut all = lock(&self.inner.courtesy);
                all.retain(|t| !t.is_finished());
                all.len()
            };
            if left == 0 || std::time::Instant::now() >= deadline {
                return;
            }
            async_io::Timer::after(std::time::Duration::from_millis(10)).await;
        }
    }

    /// Tells the task's server, best effort and off the caller's task, that a dropped call's
    /// task is cancelled (`tasks/cancel`), as [`cancel_dropped`](Self::cancel_dropped) does a
    /// `tools/call`.
    pub(super) fn cancel_dropped_task(&self, target: Target, task: String) {
        let slot = self.clone();
        let sent = std::thread::Builder::new()
            .name("mcp-task-cancel".into())
            .spawn(move || {
                async_io::block_on(async {
                    let Ok(endpoints) = slot.endpoints() else {
                        return;
                    };
                    let authorization = slot.held_authorization();
                    let headers = slot.headers_with(&authorization);
                    let mut cfg = slot.config(endpoints, &headers);
                    // A courtesy on its own short deadline, never the call's whole timeout.
                    cfg.timeout_ms = cfg.timeout_ms.min(TASK_CANCEL_MS);
                    let Ok(net) = slot.net() else {
                        return;
                    };
                    let secrets = slot.secrets_now();
                    let mut scratch = slot.scratch();
                    let mut bufs = slot.bufs(scratch.get());
                    let req = Request::TaskCancel { task: &task };
                    let _ = drive::Driver::new(&net, &cfg, |f| slot.inner.state.with(f))
                        .task_request((target, req), &secrets, &mut bufs)
                        .await;
                })
            });
        self.keep_courtesy(sent);
    }

    /// One `tasks/get` or `tasks/cancel` to `target` alone (a task lives on its server): the
    /// whole result, redacted. Not metered; on an OAuth slot, with its bearer token.
    pub(crate) async fn task_request(
        &self,
        target: Target,
        req: Request<'_>,
    ) -> Result<Vec<u8>, ProtocolError> {
        let method = req.method();
        let local = |e: &str| ProtocolError::local(method, e, &self.secrets_now());
        let endpoints = self.endpoints().map_err(|e| local(&e))?;
        let authorization = self.authorization().await.map_err(|e| local(&e))?;
        let headers = self.headers_with(&authorization);
        let secrets = self.secrets_now();
        let cfg = self.config(endpoints, &headers);
        let net = self.net().map_err(|e| local(&e))?;
        let mut scratch = self.scratch();
        let mut bufs = self.bufs(scratch.get());
        let answered = drive::Driver::new(&net, &cfg, |f| self.inner.state.with(f))
            .task_request((target, req), &secrets, &mut bufs)
            .await
            .map_err(|e| self.noted(ProtocolError::from_core(&e, &secrets)))?;
        Ok(answered.result.to_vec())
    }
}
