import { Option, type Command } from "commander";
import { TetherError } from "../../engine/errors.js";
import { roles, type Role } from "../../server/api-types.js";
import { createApiToken } from "../../server/tokens.js";
import { recordStoreAuthState } from "../auth-state.js";
import { describeLocation, openStore } from "../../stores/open-store.js";
import { globalsOf, info, out, type CliIo } from "../cli-context.js";
import { defaultDbPath, storeFromOptions } from "../connection.js";
import { formatAge, table } from "../format.js";

/** API tokens live in the store, hashed; these commands work on the store file directly. */
export function tokenCommands(program: Command, io: CliIo): void {
  const token = program.command("token").description(`API tokens (stored hashed in the store: --database-url, or --db, default ${defaultDbPath})`);

  token
    .command("create")
    .description("create a token and print it once")
    .addOption(new Option("--role <role>", "what it may do: viewer (read), operator (start and control runs), admin (halt, everything)").choices([...roles]).makeOptionMandatory())
    .requiredOption("--name <name>", "who uses it (the actor journaled with their commands)")
    .option("--json", "print JSON")
    .action(async function create(this: Command, flags: { role: Role; name: string }) {
      const globals = globalsOf(this);
      const location = storeFromOptions(globals, defaultDbPath)!;
      const store = await openStore(location);
      try {
        const created = await createApiToken(store, { name: flags.name, role: flags.role });
        await recordStoreAuthState(location, store);
        if (globals.json) return out(io, JSON.stringify({ token: created.token, id: created.record.id, name: created.record.name, role: created.record.role }));
        out(io, created.token);
        info(io, `created ${flags.role} token "${flags.name}" (${created.record.id}) in ${describeLocation(location)}`);
        info(io, "it is shown only once: store it now, and pass it with --token or TETHER_TOKEN (the dashboard: http://<host>:<port>/#token=<token>)");
      } finally {
        await store.close();
      }
    });

  token
    .command("revoke")
    .description("revoke a token: every request with it is refused from then on (its row stays, so its commands keep their actor)")
    .argument("<id>", "the token's id, as `tether token ls` lists it (tok_…)")
    .option("--json", "print JSON")
    .action(async function revoke(this: Command, id: string) {
      const globals = globalsOf(this);
      const location = storeFromOptions(globals, defaultDbPath)!;
      const store = await openStore(location);
      try {
        const at = Date.now();
        const revoked = await store.revokeToken(id, at);
        if (!revoked) throw new TetherError("not_found", `no token ${id} in ${describeLocation(location)}: list them with \`tether token ls\``);
        // Recorded beside a SQLite file too: a database that later loses the revocation is refused by serve.
        await recordStoreAuthState(location, store);
        const { hash: _hash, ...shown } = revoked;
        if (globals.json) return out(io, JSON.stringify(shown));
        // A second revocation keeps the first one's time.
        const already = revoked.revokedAt !== at;
        out(io, already ? `token "${revoked.name}" (${id}) was already revoked ${formatAge(revoked.revokedAt!, Date.now())}` : `revoked ${revoked.role} token "${revoked.name}" (${id}): requests with it are refused from now on`);
        const active = (await store.listTokens()).filter((t) => t.revokedAt === null);
        if (!active.some((t) => t.role === "admin")) info(io, "no active admin token is left: `tether token create --role admin --name <you>` makes one (a halt or a prune over the API needs it)");
      } finally {
        await store.close();
      }
    });

  token
    .command("ls")
    .description("list tokens (never their secrets)")
    .option("--json", "print JSON")
    .action(async function ls(this: Command) {
      const globals = globalsOf(this);
      const store = await openStore(storeFromOptions(globals, defaultDbPath)!);
      try {
        const tokens = (await store.listTokens()).map(({ hash: _hash, ...rest }) => rest);
        if (globals.json) return out(io, JSON.stringify(tokens));
        if (tokens.length === 0) return out(io, "no tokens: tether serve refuses to start until one exists (tether token create --role admin --name <you>), unless run with --open");
        out(io, table(["ID", "NAME", "ROLE", "CREATED", "REVOKED"], tokens.map((t) => [t.id, t.name, t.role, formatAge(t.createdAt, Date.now()), t.revokedAt ? formatAge(t.revokedAt, Date.now()) : ""])));
      } finally {
        await store.close();
      }
    });
}
