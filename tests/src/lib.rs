//! Workspace-level interop, fault-matrix and soak tests against real MCP servers.
