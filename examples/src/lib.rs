//! Runnable harnesses: the demo sweep, the `mcp` command line.
