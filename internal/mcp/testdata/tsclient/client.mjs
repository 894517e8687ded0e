// Drives `gpumem mcp` with the official MCP TypeScript SDK, as an agent's
// client would: initialize, list the tools, call peak and oom on real
// snapshots, call peak on a path outside --root (a tool error), then
// info (the server still serves). Prints what it got as one JSON object
// for internal/mcp's TestTypeScriptClient to compare with the CLI's --json.
//
// usage: node client.mjs SERVER_COMMAND ROOT[:ROOT...] FILE_FOR_PEAK FILE_FOR_OOM FILE_WITH_OOM OUTSIDE_PATH
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [command, roots, peakFile, oomFile, oomFixture, outside] = process.argv.slice(2);
const transport = new StdioClientTransport({
  command,
  args: ["mcp", ...roots.split(":").flatMap((r) => ["--root", r])],
  env: { ...process.env },
  stderr: "inherit",
});
const client = new Client({ name: "gpumem-tsclient-test", version: "1.0.0" });
await client.connect(transport);

const out = {
  server: client.getServerVersion(),
  protocol: transport.protocolVersion ?? null,
};
const { tools } = await client.listTools();
out.tools = tools.map((t) => ({ name: t.name, inputType: t.inputSchema.type, required: t.inputSchema.required ?? [] }));

const call = async (name, args) => {
  const r = await client.callTool({ name, arguments: args });
  return {
    isError: r.isError ?? false,
    structured: r.structuredContent ?? null,
    text: r.content.filter((c) => c.type === "text").map((c) => c.text),
  };
};
out.peak = await call("peak", { files: [peakFile] });
out.oom = await call("oom", { files: [oomFile] });
out.oomFixture = await call("oom", { files: [oomFixture], capacity: "100MiB" });
out.outside = await call("peak", { files: [outside] });
out.unknownArg = await call("peak", { files: [peakFile], colour: "blue" });
out.after = await call("info", { files: [peakFile] });
let unknownTool;
try {
  unknownTool = await call("no_such_tool", {});
} catch (e) {
  unknownTool = { thrown: String(e.message ?? e) };
}
out.unknownTool = unknownTool;
out.afterUnknownTool = await call("peak", { files: [peakFile], top: 1 });

await client.close();
process.stdout.write(JSON.stringify(out) + "\n");
