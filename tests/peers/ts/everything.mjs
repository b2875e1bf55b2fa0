// The official "everything" test server (@modelcontextprotocol/server-everything, pinned in
// package.json) over streamable HTTP, for the tests: bound to 127.0.0.1 on a free port (the
// server itself listens on every interface at $PORT), which it prints on stdout as its first
// line, as the other peers do (its own log goes to stderr). Nothing else of the server is
// changed.
import net from "node:net";

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const done = args.find((a) => typeof a === "function");
  return listen.call(this, 0, "127.0.0.1", () => {
    process.stdout.write(`${this.address().port}\n`);
    if (done) done();
  });
};

// The server's own log lines go to stderr, so the port is the first line on stdout.
console.log = (...args) => console.error(...args);
process.argv[2] = "streamableHttp";
await import("./node_modules/@modelcontextprotocol/server-everything/dist/index.js");
