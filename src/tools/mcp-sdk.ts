import type * as ClientModule from "@modelcontextprotocol/sdk/client/index.js";
import type * as StdioModule from "@modelcontextprotocol/sdk/client/stdio.js";
import type * as HttpModule from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type * as TypesModule from "@modelcontextprotocol/sdk/types.js";
import { optionalImport } from "../engine/optional-import.js";

/** The parts of the MCP SDK (`@modelcontextprotocol/sdk`, an optional peer) the MCP tools use. */
export interface McpSdk {
  Client: typeof ClientModule.Client;
  StdioClientTransport: typeof StdioModule.StdioClientTransport;
  StreamableHTTPClientTransport: typeof HttpModule.StreamableHTTPClientTransport;
  StreamableHTTPError: typeof HttpModule.StreamableHTTPError;
  McpError: typeof TypesModule.McpError;
  ErrorCode: typeof TypesModule.ErrorCode;
}

let loaded: Promise<McpSdk> | undefined;

/** Imports the MCP SDK on first use; without it, `missing_dependency` names the `npm install` that adds it. */
export function loadMcpSdk(feature: string): Promise<McpSdk> {
  loaded ??= (async () => {
    const [client, stdio, http, types] = await Promise.all([
      optionalImport<typeof ClientModule>("@modelcontextprotocol/sdk/client/index.js", feature),
      optionalImport<typeof StdioModule>("@modelcontextprotocol/sdk/client/stdio.js", feature),
      optionalImport<typeof HttpModule>("@modelcontextprotocol/sdk/client/streamableHttp.js", feature),
      optionalImport<typeof TypesModule>("@modelcontextprotocol/sdk/types.js", feature),
    ]);
    return {
      Client: client.Client,
      StdioClientTransport: stdio.StdioClientTransport,
      StreamableHTTPClientTransport: http.StreamableHTTPClientTransport,
      StreamableHTTPError: http.StreamableHTTPError,
      McpError: types.McpError,
      ErrorCode: types.ErrorCode,
    };
  })();
  // A failed import is not kept: installing the package fixes the next attempt.
  loaded.catch(() => (loaded = undefined));
  return loaded;
}
