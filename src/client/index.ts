export { TetherClient, type TetherClientOptions, type RunStreamEvent, type EventsOptions, type FetchLike } from "./tether-client.js";
export { TetherClientError } from "./client-error.js";
export { SseParser, type SseMessage } from "./sse-parser.js";
