//! What other files ask of a slot, implemented for it: [`AuthSlot`] (the OAuth loop of
//! `auth::slot`, and the slot's `explain_401`) and [`Listener`] (a [`SlotNet`]'s GET streams).
//!
//! Owns: nothing but the glue. It imports both sides so that neither imports the other: the
//! slot calls `auth::slot` and builds its `SlotNet`, and those see the slot only through these
//! traits, so they never import `slot.rs`.
//!
//! [`SlotNet`]: crate::stdio::SlotNet

use std::borrow::Cow;
use std::future::Future;
use std::time::Duration;

use verifi_mcp_core::drive::ProgressObserver;
use verifi_mcp_core::harness::failover::Target;
use verifi_mcp_core::wire::endpoint::Endpoint;
use verifi_mcp_core::wire::era::EraSetting;

use crate::auth::Authorizer;
use crate::auth::slot::AuthSlot;
use crate::net::{HostNet, Route};
use crate::result::ToolResult;
use crate::slot::SlotHandle;
use crate::stdio::Listener;

impl AuthSlot for SlotHandle {
    fn name(&self) -> &str {
        self.slot()
    }

    fn endpoints(&self) -> Result<(Endpoint<'_>, Option<Endpoint<'_>>), String> {
        SlotHandle::endpoints(self)
    }

    fn route(&self) -> Result<&Route, String> {
        SlotHandle::route(self)
    }

    fn net(&self) -> &HostNet {
        &self.inner.run.net
    }

    fn authorizer(&self) -> Option<&Authorizer> {
        self.inner.auth.as_ref()
    }

    fn timeout(&self) -> Duration {
        Duration::from_millis(self.inner.run.options.timeout_ms)
    }

    fn era(&self) -> (EraSetting, Option<bool>) {
        let probed = self.inner.state.with(|s| s.era(Target::Primary));
        (self.inner.run.options.era, probed)
    }

    fn secrets(&self) -> Cow<'_, [Vec<u8>]> {
        self.secrets_now()
    }

    fn failure(&self, tool: &str, error: &str) -> ToolResult {
        SlotHandle::failure(self, tool, error)
    }

    fn call_once(
        &self,
        tool: &str,
        json: &[u8],
        on_progress: Option<ProgressObserver<'_>>,
        bearer: Option<&str>,
    ) -> impl Future<Output = (ToolResult, Option<String>)> + Send {
        SlotHandle::call_once(self, tool, json, on_progress, bearer)
    }
}

impl SlotHandle {
    /// A 401 on a slot without OAuth: says what the server asked for (its challenge and
    /// authorization server), so the caller knows which flow to configure.
    pub(crate) async fn explain_401(&self, r: ToolResult, header: Option<String>) -> ToolResult {
        crate::auth::slot::explain_401(self, r, header).await
    }
}

impl Listener for SlotHandle {
    fn listen(&self, target: Target) -> impl Future<Output = ()> + Send {
        crate::slot::get_stream::ensure(self, target)
    }
}
