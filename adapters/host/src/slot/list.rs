//! Lists and the rest of the protocol: tools (with their output schemas), resources,
//! prompts, ping.

use super::*;

impl SlotHandle {
    /// The names of the slot's tools (every page). Fails over like a call; a failure of the
    /// last server tried is returned, reading `tools/list failed: …`.
    pub async fn list_tools(&self) -> Result<Vec<String>, ListToolsError> {
        let mut names = Vec::new();
        self.each_tool(|name, _| names.push(name.to_owned()))
            .await?;
        Ok(names)
    }

    /// The slot's tools with their whole descriptions (each as the server sent it: `name`,
    /// `description`, `inputSchema` …, redacted), every page. Fails over like
    /// [`list_tools`](Self::list_tools).
    pub async fn list_tools_described(&self) -> Result<Vec<serde_json::Value>, ListToolsError> {
        let mut tools = Vec::new();
        // The core validated each tool's JSON, so it parses.
        self.each_tool(|_, json| {
            tools.push(serde_json::from_slice(json).unwrap_or(serde_json::Value::Null))
        })
        .await?;
        Ok(tools)
    }

    /// tools/list through the driver, each tool's name and redacted JSON to `on_tool`.
    pub(crate) async fn each_tool(
        &self,
        mut on_tool: impl FnMut(&str, &[u8]),
    ) -> Result<(), ListToolsError> {
        let endpoints = self
            .endpoints()
            .map_err(|e| ListToolsError::local(format!("tools/list failed: {e}")))?;
        let authorization = match self.authorization().await {
            Ok(a) => a,
            Err(e) => return Err(ListToolsError::local(format!("tools/list failed: {e}"))),
        };
        let headers = self.headers_with(&authorization);
        let secrets = self.secrets_now();
        let cfg = self.config(endpoints, &headers);
        let net = self
            .net()
            .map_err(|e| ListToolsError::local(format!("tools/list failed: {e}")))?;
        let mut scratch = self.scratch();
        let mut bufs = self.bufs(scratch.get());
        // Collected first: a primary that fails part-way restarts the list on the fallback,
        // and only the list that ends is handed over.
        let mut tools = ListCollector::new(self.inner.run.options.reply_cap);
        // Which server answered: the core says (the fallback when the list started there or
        // restarted there after a primary failure).
        let answered_by = drive::Driver::new(&net, &cfg, |f| self.inner.state.with(f))
            .list(ListMethod::Tools, &secrets, &mut bufs, |item| {
                tools.take(item)
            })
            .await
            .map_err(|e| ListToolsError {
                message: self.with_stdio_note(redact_string(&e.to_string(), &secrets)),
                kind: ListToolsError::kind_of(&e.error),
            })?;
        let on_fallback = answered_by == Target::Fallback;
        let tools = tools.finish().map_err(|why| ListToolsError {
            message: format!("tools/list failed: {why}"),
            kind: Kind::Unreachable(verifi_mcp_core::wire::failure::Cause::TooLarge),
        })?;
        // Each tool's outputSchema is learned (a new list replaces the old one).
        let mut schemas = HashMap::new();
        let mut prints = Vec::with_capacity(tools.len());
        for json in &tools {
            // The core validated the JSON; a tool without a string name is skipped.
            let Some(name) = Value::parse(json, JsonLimits::default())
                .ok()
                .and_then(verifi_mcp_core::wire::jsonrpc::tool_name)
            else {
                continue;
            };
            let name = owned(&name);
            learn_output_schema(&mut schemas, &name, json);
            if let Ok(v) = serde_json::from_slice::<serde_json::Value>(json) {
                prints.push((name.clone(), crate::integrity::ToolPrint::of(&v)));
            }
            on_tool(&name, json);
        }
        *lock(&self.inner.output_schemas) = schemas;
        // A 2026 list says how long it may be kept: fetched again, when it is up, before the
        // next call.
        let ttl = { self.inner.state.with(SlotState::take_tools_ttl_ms) };
        lock(&self.inner.integrity).expires = ttl.map(|ms| {
            std::time::Instant::now()
                + std::time::Duration::from_millis(ms.min(u64::from(u32::MAX)))
        });
        self.observe_tools(usize::from(on_fallback), prints);
        Ok(())
    }
}

/// Keeps `name`'s `outputSchema`, compiled, if its tools/list entry declares one.
pub(super) fn learn_output_schema(
    schemas: &mut HashMap<String, Arc<OutputSchema>>,
    name: &str,
    json: &[u8],
) {
    // Most tools declare none: only those whose JSON names one are parsed.
    if !json.windows(14).any(|w| w == b"\"outputSchema\"") {
        return;
    }
    let Ok(serde_json::Value::Object(mut tool)) = serde_json::from_slice(json) else {
        return;
    };
    if let Some(schema) = tool.remove("outputSchema").filter(|s| !s.is_null()) {
        schemas.insert(name.to_owned(), Arc::new(OutputSchema::compile(&schema)));
    }
}

/// The rest of the protocol: resources, prompts, ping, and the structured-output check.
impl SlotHandle {
    /// An answered call of a tool with an `outputSchema`: its `structuredContent` must match,
    /// or the call becomes a tool-level failure (`ok: false, isError: true`) whose error names
    /// the failing path, with its `tool_error` event. It is already metered (the same record
    /// as a tool error's). The kept reply stays only if the run asked for it.
    pub(super) fn check_structured(
        &self,
        tool: &str,
        schema: &OutputSchema,
        owned: &mut ToolResult,
    ) {
        let checked = if owned.ok() {
            schema.check(owned.call_result().as_ref())
        } else {
            Ok(())
        };
        if !self.inner.run.options.keep_raw {
            owned.raw = None;
        }
        if let Err(why) = checked {
            let why = redact_string(&why, &self.inner.secrets);
            RunTimeline(&self.inner.run.records).emit(&TimelineEvent::ToolError {
                slot: &self.inner.spec.slot,
                tool,
                error: &why,
            });
            owned.fail_check(why);
        }
    }

    /// A list through the driver, each item (or a restart on the fallback) to `on_item`.
    pub(super) async fn each_item(
        &self,
        list: ListMethod,
        on_item: impl FnMut(drive::ListItem<'_>) + Send,
    ) -> Result<(), ProtocolError> {
        let local = |e: &str, secrets: &[Vec<u8>]| ProtocolError::local(list.method(), e, secrets);
        let endpoints = self
            .endpoints()
            .map_err(|e| local(&e, &self.secrets_now()))?;
        // The slot's route (proxy, trust) and, on an OAuth slot, its bearer token: as a call.
        let authorization = self
            .authorization()
            .await
            .map_err(|e| local(&e, &self.secrets_now()))?;
        let headers = self.headers_with(&authorization);
        let secrets = self.secrets_now();
        let cfg = self.config(endpoints, &headers);
        let net = self.net().map_err(|e| local(&e, &secrets))?;
        let mut scratch = self.scratch();
        let mut bufs = self.bufs(scratch.get());
        drive::Driver::new(&net, &cfg, |f| self.inner.state.with(f))
            .list(list, &secrets, &mut bufs, on_item)
            .await
            .map(|_| ())
            .map_err(|e| self.noted(ProtocolError::from_core(&e, &secrets)))
    }

    /// A protocol error with the note of a stopped stdio server, when no server answered.
    pub(super) fn noted(&self, mut e: ProtocolError) -> ProtocolError {
        if e.code.is_none() {
            e.message = self.with_stdio_note(e.message);
        }
        e
    }

    /// Every page of `list`, each item typed.
    pub(super) async fn list_typed<T: serde::de::DeserializeOwned>(
        &self,
        list: ListMethod,
    ) -> Result<Vec<T>, ProtocolError> {
        let secrets = &self.inner.secrets;
        let mut items = ListCollector::new(self.inner.run.options.reply_cap);
        self.each_item(list, |item| items.take(item)).await?;
        let items = items
            .finish()
            .map_err(|why| ProtocolError::local(list.method(), &why, secrets))?;
        items
            .iter()
            .map(|json| typed(list.method(), json, &self.inner.secrets))
            .collect()
    }

    /// The slot's resources (`resources/list`, every page; a server that repeats its cursor
    /// is stopped). Fails over like [`list_tools`](Self::list_tools); not metered.
    pub async fn list_resources(&self) -> Result<Vec<Resource>, ProtocolError> {
        self.list_typed(ListMethod::Resources).await
    }

    /// The slot's resource templates (`resources/templates/list`, every page).
    pub async fn list_resource_templates(&self) -> Result<Vec<ResourceTemplate>, ProtocolError> {
        self.list_typed(ListMethod::ResourceTemplates).await
    }

    /// The slot's prompts (`prompts/list`, every page).
    pub async fn list_prompts(&self) -> Result<Vec<Prompt>, ProtocolError> {
        self.list_typed(ListMethod::Prompts).await
    }

    /// A request that failed before anything was sent: a content-bearing one is metered and on
    /// the timeline like a call's local failure (no failover); `ping` is not.
    pub(super) fn request_failed_locally(&self, req: &Request<'_>, why: &str) -> ProtocolError {
        let err = ProtocolError::local(req.method(), why, &self.inner.secrets);
        if req.bears_content() {
            let run = &self.inner.run;
            drive::local_failure(
                &self.inner.spec.slot,
                req.method(),
                &err.message,
                &mut RunLedger(&run.records),
                &mut RunTimeline(&run.records),
            );
        }
        err
    }

    /// One request through the driver: the redacted result JSON and the latency.
    pub(super) async fn request(&self, req: Request<'_>) -> Result<(Vec<u8>, u64), ProtocolError> {
        let endpoints = self
            .endpoints()
            .map_err(|e| self.request_failed_locally(&req, &e))?;
        // The slot's route (proxy, trust) and, on an OAuth slot, its bearer token: as a call.
        let authorization = self
            .authorization()
            .await
            .map_err(|e| self.request_failed_locally(&req, &e))?;
        let headers = self.headers_with(&authorization);
        let secrets = self.secrets_now();
        let secrets = &secrets[..];
        let cfg = self.config(endpoints, &headers);
        let net = self
            .net()
            .map_err(|e| self.request_failed_locally(&req, &e))?;
        let run = &self.inner.run;
        let mut scratch = self.scratch();
        let mut bufs = self.bufs(scratch.get());
        let answered = drive::Driver::new(&net, &cfg, |f| self.inner.state.with(f))
            .request(
                req,
                secrets,
                &mut RunLedger(&run.records),
                &mut RunTimeline(&run.records),
                &mut bufs,
            )
            .await
            .map_err(|e| self.noted(ProtocolError::from_core(&e, secrets)))?;
        Ok((answered.result.to_vec(), answered.latency_ms))
    }

    /// Reads the resource at `uri` (`resources/read`): its contents, redacted. Metered like a
    /// tool call (evidence bytes: the redacted result); a failure is also a `tool_error`
    /// event with `resources/read` as the tool. Fails over like a list.
    pub async fn read_resource(&self, uri: &str) -> Result<ReadResourceResult, ProtocolError> {
        let (json, _) = self.request(Request::ResourcesRead { uri }).await?;
        typed("resources/read", &json, &self.inner.secrets)
    }

    /// Gets the prompt `name` with `args` (an object of strings; `()` or `null` for none)
    /// (`prompts/get`): its messages, redacted. Metered like
    /// [`read_resource`](Self::read_resource).
    pub async fn get_prompt(
        &self,
        name: &str,
        args: impl Serialize,
    ) -> Result<GetPromptResult, ProtocolError> {
        let secrets = &self.inner.secrets;
        let here = Request::PromptsGet {
            name,
            arguments: None,
        };
        let json = serde_json::to_vec(&args)
            .map_err(|e| self.request_failed_locally(&here, &format!("arguments: {e}")))?;
        let arguments = match Value::parse(&json, JsonLimits::default()) {
            Ok(v) if v.is_null() => None,
            Ok(v) if v.kind() == verifi_mcp_core::wire::json::Kind::Object => Some(v),
            Ok(_) => {
                return Err(self.request_failed_locally(&here, "arguments must be a JSON object"));
            }
            Err(e) => {
                return Err(
                    self.request_failed_locally(&here, &format!("arguments are not JSON: {e}"))
                );
            }
        };
        let (json, _) = self
            .request(Request::PromptsGet { name, arguments })
            .await?;
        typed("prompts/get", &json, secrets)
    }

    /// `ping`: the server's round trip in ms (the handshake first, if the session is new).
    /// Not metered, like `tools/list`. Fails over like a list.
    pub async fn ping(&self) -> Result<u64, ProtocolError> {
        self.request(Request::Ping).await.map(|(_, ms)| ms)
    }
}
