/**
 * What users and Tether's own tests share: fixtures for runs, tools and stores. The store
 * conformance suite needs vitest and lives in its own entry point,
 * `tether-runtime/testing/store-conformance`, so importing these fixtures never loads a test runner.
 */
export { Ledger, effectTool, effectInput, type EffectInput, type EffectResult, type EffectToolOptions } from "./ledger.js";
export { sequenceAgent, type SequenceAgentOptions } from "./sequence-agent.js";
export { TestClock } from "./test-clock.js";
export { sequentialIds } from "./sequential-ids.js";
export { tempSqlite, type TempSqlite } from "./temp-store.js";
export { harness, type Harness, type HarnessRuntimeOptions } from "./harness.js";
export { waitUntil } from "./wait-until.js";
export {
  OpenAICompatibleServer,
  startOpenAICompatibleServer,
  type OpenAICompatibleServerOptions,
  type ScriptedResponse,
  type ScriptedCompletion,
  type ScriptedError,
  type ScriptedToolCall,
  type ScriptedUsage,
  type RecordedRequest,
  type Responder,
  type ChatCompletionRequestBody,
} from "./openai-compatible-server.js";
export { livingProcesses, type ProcessRow } from "./process-table.js";
export { TalkingModel } from "./talking-model.js";
