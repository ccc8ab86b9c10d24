export * from "./engine/errors.js";
export type { Json, JsonObject } from "./engine/json.js";
export type { Clock } from "./engine/clock.js";
export { systemClock } from "./engine/clock.js";
export { idempotencyKey, randomIds, type IdGenerator } from "./engine/ids.js";
export * from "./engine/status.js";
export type { Message, AgentState, ToolCallPart } from "./engine/state.js";
export type { Usage } from "./engine/usage.js";
export { PriceTable, type ModelPrice } from "./engine/pricing.js";
export * from "./engine/model.js";
export { tool, type Tool, type AnyTool, type ToolDefinition, type ToolContext, type CompensationContext, type CheckResult } from "./engine/tool.js";
export { resource, type ResourceDefinition, type ResourceContext, type AnyResource } from "./engine/resource.js";
export { defineAgent, isFunctionAgent, type AgentDefinition, type AgentBase, type StepAgentDefinition, type Action, type Outcome, type ApplyResult } from "./engine/agent.js";
export { durableAgent, type AgentContext, type DurableAgentOptions } from "./agents/durable-agent.js";
export type { AiSdkGates } from "./models/ai-sdk-gates.js";
export {
  PauseSignal,
  GateFailedError,
  type DurableContext,
  type FunctionAgentDefinition,
  type ModelCallOptions,
  type ModelStepOptions,
  type StepContext,
  type StepOptions,
} from "./engine/function-agent.js";
export type { Budgets } from "./engine/budgets.js";
export type * from "./engine/store.js";
export { snapshotSchemaVersion } from "./engine/store.js";
export { eventId, type RunEvent, EventBus } from "./engine/events.js";
export { Runtime, createRuntime, type RuntimeOptions, type PauseOptions, type ResumeOptions, type StartOptions, type ForkOptions, type ControlOptions, type CancelOptions, type CancelPreview } from "./engine/runtime.js";
export type { HaltResult, UnhaltResult, RunFailure } from "./engine/halt-command.js";
export type { InheritedChoice, InheritedEffect, ForkInheritance } from "./engine/fork-inheritance.js";
export type { ModelResolver, CompensationPolicy } from "./engine/engine-context.js";
export type { LeaseHolder, ProcessProbe } from "./engine/lease-holder.js";
export { localProcessProbe } from "./local-process.js";
export { SqliteStore, type SqliteStoreOptions, type SqliteStoreConstructor } from "./sqlite-store-types.js";
export { optionalPeers } from "./engine/optional-import.js";
export { openStore, storeLocation, describeLocation, defaultPostgresSchema, type StoreLocation } from "./stores/open-store.js";
export { SimulatedModel, genericScript, scriptedTurns, tokenize, type SimulatedModelOptions, type SimulatedScript, type SimulatedTurn, type ScriptContext } from "./models/simulated-model.js";
export { ModelRegistry, type ModelFactory } from "./models/model-registry.js";
export { aiSdkModel, type AiSdkModelOptions, type AiSdkCallSettings, type AiSdkLanguageModel, type AiSdkJsonValue } from "./models/ai-sdk-model.js";
export { createModelRegistry, parseOpenAICompatible, type ModelRegistryOptions } from "./models/providers.js";
export { mcpTools, type McpToolset, type McpToolsOptions, type McpToolInfo } from "./tools/mcp-tools.js";
export { McpConnection, type McpServerParams, type McpConnectionOptions, type McpTrafficEvent, type McpClient, type McpJsonRpcMessage } from "./tools/mcp-connection.js";
export { McpToolCallError } from "./tools/mcp-errors.js";
export { fromAiSdkTool, type AiSdkToolDeclarations, type AiSdkTool, type AiSdkToolExecutionOptions } from "./tools/ai-sdk-tool.js";
export { runCommand, type RunCommandOptions, type CommandSpec, type CommandResult, type CommandStream } from "./tools/command.js";
export { commandTool, type CommandToolDefinition } from "./tools/command-tool.js";
export { waitingForPerson, personWaitReasonOf, personWaitCodes, findWaitStart, waitStartIn, type PersonWait, type PersonWaitReason } from "./engine/waiting.js";
export { startWebhookNotifier, type WebhookNotifier, type WebhookNotifierOptions } from "./notify/webhooks.js";
export type { WebhookConfig } from "./notify/webhook-config.js";
export type { RunWaitingPayload } from "./notify/webhook-payload.js";
export { verifyWebhookSignature, signWebhookBody, signatureHeader, type VerifyWebhookOptions, type WebhookVerification } from "./notify/webhook-signature.js";
export { toolLoopAgent, pendingToolCall, type ToolLoopAgentOptions } from "./agents/tool-loop-agent.js";
export { createTether, defaultDatabasePath, type TetherOptions } from "./tether.js";
export { traceRuns, tracingAvailable, tracerName, type RunTracingOptions, type TraceableRuntime } from "./telemetry/run-tracing.js";
export * from "./server/index.js";
export * from "./client/index.js";
