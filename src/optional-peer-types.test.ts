import type { LanguageModelV3, LanguageModelV3CallOptions } from "@ai-sdk/provider";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { JSONRPCMessage, Tool } from "@modelcontextprotocol/sdk/types.js";
import { describe, expect, it } from "vitest";
import type { AiSdkCallSettings, AiSdkLanguageModel } from "./models/ai-sdk-model.js";
import type { McpClient, McpJsonRpcMessage } from "./tools/mcp-connection.js";
import type { McpToolInfo } from "./tools/mcp-tools.js";

/**
 * The published types name Tether's own shapes instead of the optional peers' types (so a project
 * without the peers compiles). These compile-time checks keep each shape what the peer's type is:
 * `npm run typecheck` fails when a peer's new version no longer fits.
 */
type Assignable<To, From extends To> = From;

export type Checks = [
  Assignable<AiSdkLanguageModel, LanguageModelV3>,
  Assignable<AiSdkCallSettings, Omit<LanguageModelV3CallOptions, "prompt" | "tools" | "toolChoice" | "abortSignal">>,
  Assignable<Omit<LanguageModelV3CallOptions, "prompt" | "tools" | "toolChoice" | "abortSignal">, AiSdkCallSettings>,
  Assignable<McpClient, Client>,
  Assignable<McpToolInfo, Tool>,
  Assignable<McpJsonRpcMessage, JSONRPCMessage>,
];

describe("the public types for optional peers", () => {
  it("are checked at compile time (npm run typecheck)", () => {
    const checks: Checks | undefined = undefined;
    expect(checks).toBeUndefined();
  });
});
