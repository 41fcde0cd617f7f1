// An MCP client built on the official TypeScript SDK, driven by
// mcpserver/sdkclient_test.go. It connects to MCP_URL over streamable HTTP
// with the bearer token MCP_TOKEN, reads a plan (JSON) on stdin, carries it
// out and writes one JSON report on stdout.
//
// The plan: {"calls": [{"tool", "arguments"}], "prompts": [{"name",
// "arguments"}], "resources": ["uri"]}. An argument "$execution_id" is the
// execution_id of the latest request_execution result.
//
// The SDK's Client.callTool validates structuredContent against the tool's
// outputSchema itself and throws when it does not conform. The script checks
// again with Ajv, and checks that the same validator refuses a broken copy
// of the result, so a validator that accepts anything is noticed.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import Ajv from "ajv";

const url = new URL(process.env.MCP_URL);
const token = process.env.MCP_TOKEN;

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const plan = JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}");

const ajv = new Ajv({ allErrors: true, strict: false });

// broken is a copy of a result that no sound output schema accepts: each
// required property replaced by a value of another type, or, with none
// required, an object in place of the whole.
function broken(value, schema) {
  const out = { ...value };
  const required = schema.required ?? [];
  if (required.length === 0) return [value];
  for (const name of required) {
    const type = schema.properties?.[name]?.type;
    out[name] = type === "string" ? 42 : "not the declared type";
  }
  return out;
}

const transport = new StreamableHTTPClientTransport(url, {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: "nomos-sdk-test", version: "1.0.0" });
const report = { tools: [], calls: [], resources: [], templates: [], reads: [], prompts: [], promptResults: [] };

try {
  await client.connect(transport);
  report.server = client.getServerVersion();
  report.capabilities = client.getServerCapabilities();

  const { tools } = await client.listTools();
  for (const t of tools) {
    let inputCompiles = true;
    let inputError = "";
    try {
      ajv.compile(t.inputSchema);
    } catch (e) {
      inputCompiles = false;
      inputError = String(e);
    }
    report.tools.push({ name: t.name, inputSchema: t.inputSchema, outputSchema: t.outputSchema ?? null, inputCompiles, inputError });
  }
  const byName = new Map(tools.map((t) => [t.name, t]));

  let lastExecution = "";
  for (const call of plan.calls ?? []) {
    const args = {};
    for (const [k, v] of Object.entries(call.arguments ?? {})) {
      args[k] = v === "$execution_id" ? lastExecution : v;
    }
    const tool = byName.get(call.tool);
    const entry = { tool: call.tool, arguments: args };
    if (tool) {
      const validInput = ajv.compile(tool.inputSchema);
      entry.argumentsValid = validInput(args);
      entry.argumentErrors = validInput.errors ?? [];
    }
    try {
      const res = await client.callTool({ name: call.tool, arguments: args });
      entry.isError = Boolean(res.isError);
      entry.text = (res.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
      entry.structuredContent = res.structuredContent ?? null;
      if (tool?.outputSchema && res.structuredContent) {
        const valid = ajv.compile(tool.outputSchema);
        entry.validated = valid(res.structuredContent);
        entry.validationErrors = valid.errors ?? [];
        entry.rejectsBroken = !valid(broken(res.structuredContent, tool.outputSchema));
      }
      if (call.tool === "request_execution" && res.structuredContent?.execution_id) {
        lastExecution = res.structuredContent.execution_id;
      }
    } catch (e) {
      entry.thrown = String(e?.message ?? e);
    }
    report.calls.push(entry);
  }

  const { resources } = await client.listResources();
  report.resources = resources;
  const { resourceTemplates } = await client.listResourceTemplates();
  report.templates = resourceTemplates;
  for (const uri of plan.resources ?? []) {
    try {
      const res = await client.readResource({ uri });
      report.reads.push({ uri, contents: res.contents });
    } catch (e) {
      report.reads.push({ uri, thrown: String(e?.message ?? e) });
    }
  }

  const { prompts } = await client.listPrompts();
  report.prompts = prompts;
  for (const p of plan.prompts ?? []) {
    try {
      const res = await client.getPrompt({ name: p.name, arguments: p.arguments ?? {} });
      report.promptResults.push({ name: p.name, messages: res.messages });
    } catch (e) {
      report.promptResults.push({ name: p.name, thrown: String(e?.message ?? e) });
    }
  }
} finally {
  await client.close().catch(() => {});
}
process.stdout.write(JSON.stringify(report) + "\n");
