import { TetherError } from "../engine/errors.js";

/** An MCP tool answered with `isError: true`: the model gets the message as the tool's error. */
export class McpToolCallError extends TetherError<"tool_error"> {
  constructor(toolName: string, message: string) {
    super("tool_error", message, { toolName });
    this.name = "McpToolCallError";
  }
}
