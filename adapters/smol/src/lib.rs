//! Host adapter: drives verifi-mcp-core over smol / async-io TCP and rustls.
