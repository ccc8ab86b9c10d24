export { createApp, maxBodyBytes, type AppOptions } from "./app.js";
export { startServer, isLoopbackHost, InsecureBindError, type ServerOptions, type RunningServer } from "./serve.js";
export { roleAllows, type AuthOptions, type Identity, type TokenSource } from "./auth.js";
export { createApiToken, hashToken, generateToken, type CreatedToken } from "./tokens.js";
export { runView } from "./run-view.js";
export { httpStatusOf } from "./http-errors.js";
export type * from "./api-types.js";
export { roles } from "./api-types.js";
