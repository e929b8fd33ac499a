// Quiver's LanceDB probe: drives the real Lance core shipped in
// @lancedb/lancedb (see package.json) the way a LanceDB user would, so the
// Go tests can prove that Lance reads what Quiver writes and the other way
// round. A LanceDB database is a folder; table <name> is the Lance dataset
// <dbdir>/<name>.lance.
//
//   node probe.mjs scenario <dbdir> [--name t] [--storage 2.0|2.1]
//       LanceDB writes a reference dataset: create (ids 1-5), append (6-8),
//       mergeInsert (update 2 and 7, insert 9 and 10), delete id 4
//   node probe.mjs verify <dbdir> <name> [--key id] [--limit N] [--mutate]
//       schema, stats, indices, rows sorted by key, row addresses, the row
//       count of every version; --mutate then runs LanceDB's mergeInsert
//       (update the first row, insert a new key) and a delete of that key
//   node probe.mjs race <dbdir> <name> --cmd "<shell command>" [--key id]
//       open the table, run the command (another writer commits), then
//       mutate from the stale version: Lance must rebase
//   node probe.mjs versions <dbdir> <name>
//   node probe.mjs append <dbdir> <name> --from N --count M
//       tbl.add() rows id in [N, N+M) of the scenario schema
//   node probe.mjs index <dbdir> <name> --column id
//       a BTree scalar index on the column; prints listIndices()
//   node probe.mjs create-ipc <dbdir> <name> <file.arrow> [--storage 2.0]
//       createTable from an Arrow IPC file; prints {"rows":..,"ms":..}, ms
//       timing createTable alone
//   node probe.mjs merge-insert <dbdir> <name> <source.arrow> --on id[,k2]
//        [--matched update_all|do_nothing] [--not-matched insert_all|do_nothing]
//        [--by-source keep|delete] [--compare <other>]
//       LanceDB's mergeInsert of the IPC source; prints {"ok":{stats},"ms":..}
//       or {"error":".."} (exit 0 either way, for differential tests); with
//       --compare it then dumps <name> and <other>
//   node probe.mjs dump <dbdir> <name>... --on id[,k2]
//       one JSON line per table: {"name","version","rows"} with the rows
//       sorted by the key columns (bigints as strings)

import * as lancedb from "@lancedb/lancedb";
import { execSync } from "node:child_process";
import { createRequire } from "node:module";
import * as fs from "node:fs";
import * as path from "node:path";

// The CommonJS apache-arrow instance is the one @lancedb/lancedb uses
// (mixing it with the ESM build breaks instanceof checks).
const arrow = createRequire(import.meta.url)("apache-arrow");

// Options that take no value; every other --option takes the next word.
const FLAGS = new Set(["mutate"]);

function parseArgs(argv) {
  const pos = [];
  const opt = {};
  for (let i = 0; i < argv.length; i++) {
    if (!argv[i].startsWith("--")) {
      pos.push(argv[i]);
      continue;
    }
    const k = argv[i].slice(2);
    if (FLAGS.has(k)) opt[k] = true;
    else opt[k] = argv[++i];
  }
  return { pos, opt };
}

// plain turns Arrow values into JSON-ready ones, bigints as strings.
function plain(v) {
  if (v === null || v === undefined) return null;
  if (typeof v === "bigint") return v.toString();
  if (v instanceof Date) return v.toISOString();
  if (ArrayBuffer.isView(v)) return Array.from(v, plain);
  if (Array.isArray(v)) return v.map(plain);
  if (typeof v === "object") {
    if (typeof v.toArray === "function" && typeof v.length === "number") return Array.from(v.toArray(), plain);
    const src = typeof v.toJSON === "function" ? v.toJSON() : v;
    return Object.fromEntries(Object.entries(src).map(([k, x]) => [k, plain(x)]));
  }
  return v;
}

// native is plain keeping bigints and dates, so rows can be written back.
function native(v) {
  if (v === null || v === undefined) return null;
  if (typeof v === "bigint" || v instanceof Date) return v;
  if (ArrayBuffer.isView(v)) return Array.from(v, native);
  if (Array.isArray(v)) return v.map(native);
  if (typeof v === "object") {
    if (typeof v.toArray === "function" && typeof v.length === "number") return Array.from(v.toArray(), native);
    const src = typeof v.toJSON === "function" ? v.toJSON() : v;
    return Object.fromEntries(Object.entries(src).map(([k, x]) => [k, native(x)]));
  }
  return v;
}

function compare(a, b) {
  const num = (x) => (typeof x === "string" && /^-?\d+$/.test(x) ? BigInt(x) : x);
  const x = num(a);
  const y = num(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

function storage(opt) {
  return opt.storage ? { new_table_data_storage_version: String(opt.storage) } : {};
}

const scenarioSchema = new arrow.Schema([
  new arrow.Field("id", new arrow.Int64(), false),
  new arrow.Field("name", new arrow.Utf8(), true),
  new arrow.Field("score", new arrow.Float64(), false),
  new arrow.Field("tags", new arrow.List(new arrow.Field("item", new arrow.Utf8(), true)), true),
]);

const row = (id, name, score, tags) => ({ id: BigInt(id), name, score, tags });

let limit = 50;

async function show(tbl, label, key) {
  console.log(`== ${label}: version=${await tbl.version()} rows=${await tbl.countRows()}`);
  const rows = (await tbl.query().toArray()).map(plain);
  if (rows.length && key in rows[0]) rows.sort((a, b) => compare(a[key], b[key]));
  for (const r of rows.slice(0, limit)) console.log("  " + JSON.stringify(r));
  if (rows.length > limit) console.log(`  ... ${rows.length - limit} more rows (--limit N)`);
}

async function versions(tbl) {
  const latest = await tbl.version();
  console.log("== versions");
  for (const v of await tbl.listVersions()) {
    await tbl.checkout(v.version);
    console.log(`  v${v.version} rows=${await tbl.countRows()} meta=${JSON.stringify(v.metadata)}`);
  }
  await tbl.checkoutLatest();
  if ((await tbl.version()) !== latest) console.log(`  (latest is now ${await tbl.version()})`);
}

async function scenario(db, opt) {
  const tbl = await db.createTable(
    opt.name || "t",
    [row(1, "alice", 1.5, ["a", "b"]), row(2, null, 2.5, []), row(3, "carol", 3.5, null), row(4, "dave", 4.5, ["x", null]), row(5, "eve", 5.5, ["y"])],
    { schema: scenarioSchema, mode: "overwrite", storageOptions: storage(opt) },
  );
  await show(tbl, "create", "id");
  await tbl.add([row(6, "frank", 6.5, ["f"]), row(7, null, 7.5, null), row(8, "heidi", 8.5, [])]);
  await show(tbl, "append", "id");
  const merged = await tbl
    .mergeInsert("id")
    .whenMatchedUpdateAll()
    .whenNotMatchedInsertAll()
    .execute([row(2, "bob", 20.5, ["upd"]), row(7, "grace", 70.5, ["upd2"]), row(9, "ivan", 9.5, ["new"]), row(10, null, 10.5, null)]);
  console.log("mergeInsert: " + JSON.stringify(plain(merged)));
  await show(tbl, "mergeInsert", "id");
  console.log("delete: " + JSON.stringify(plain(await tbl.delete("id = 4"))));
  await show(tbl, "delete", "id");
  await versions(tbl);
}

// mutate runs LanceDB's mergeInsert (the first row with its first numeric
// or string column changed, plus a copy of the last row under a new key)
// and then deletes the new key again.
async function mutate(tbl, key, label) {
  const schema = await tbl.schema();
  const rows = (await tbl.query().toArray()).map(native);
  if (rows.length === 0) throw new Error(label + " needs at least one row");
  const changed = { ...rows[0] };
  const added = { ...rows[rows.length - 1] };
  const top = rows.map((r) => r[key]).reduce((a, b) => (a > b ? a : b));
  added[key] = typeof top === "bigint" ? top + 1000n : typeof top === "number" ? top + 1000 : top + "-new";
  for (const f of schema.fields) {
    const type = String(f.type);
    if (f.name === key) continue;
    if (/^(Float|Int|Uint)/.test(type) && changed[f.name] !== null) {
      changed[f.name] = typeof changed[f.name] === "bigint" ? changed[f.name] + 1n : changed[f.name] + 1;
      break;
    }
    if (/^Utf8/.test(type)) {
      changed[f.name] = "mutated";
      break;
    }
  }
  const merged = await tbl.mergeInsert(key).whenMatchedUpdateAll().whenNotMatchedInsertAll().execute([changed, added]);
  console.log(`${label} mergeInsert: ` + JSON.stringify(plain(merged)));
  const literal = typeof added[key] === "string" ? `'${added[key].replace(/'/g, "''")}'` : String(added[key]);
  console.log(`${label} delete: ` + JSON.stringify(plain(await tbl.delete(`${key} = ${literal}`))));
}

async function verify(db, name, opt) {
  const key = opt.key || "id";
  const tbl = await db.openTable(name);
  console.log("== schema");
  for (const f of (await tbl.schema()).fields) console.log(`  ${f.name}: ${f.type} nullable=${f.nullable}`);
  console.log("== stats " + JSON.stringify(plain(await tbl.stats())));
  console.log("== indices " + JSON.stringify(plain(await tbl.listIndices())));
  await show(tbl, "latest", key);
  const addrs = (await tbl.query().select([key, "_rowaddr", "_rowid"]).toArray()).map(plain);
  console.log("== row addresses (fragment<<32 | offset) and row ids");
  for (const r of addrs.slice(0, limit)) {
    const a = BigInt(r._rowaddr);
    console.log(`  ${key}=${r[key]} frag=${a >> 32n} off=${a & 0xffffffffn} rowid=${r._rowid}`);
  }
  await versions(tbl);
  if (opt.mutate) {
    await mutate(tbl, key, "mutate");
    await show(tbl, "after mutate", key);
    await versions(tbl);
  }
}

async function race(db, name, opt) {
  const key = opt.key || "id";
  if (!opt.cmd) throw new Error("race needs --cmd '<shell command that commits to the table>'");
  const tbl = await db.openTable(name);
  console.log(`== LanceDB opened ${name} at version ${await tbl.version()}`);
  execSync(opt.cmd, { stdio: "inherit", shell: true });
  try {
    await mutate(tbl, key, "race");
  } catch (e) {
    console.log("race FAILED: " + e.message);
  }
  await tbl.checkoutLatest();
  await show(tbl, "after race", key);
  await versions(tbl);
}

async function append(db, name, opt) {
  const from = Number(opt.from ?? 1000);
  const count = Number(opt.count ?? 3);
  const tbl = await db.openTable(name);
  await tbl.add(Array.from({ length: count }, (_, k) => row(from + k, `lancedb${from + k}`, from + k + 0.25, [`l${from + k}`])));
  console.log(`appended ${count} rows: version=${await tbl.version()} rows=${await tbl.countRows()}`);
}

async function index(db, name, opt) {
  const tbl = await db.openTable(name);
  await tbl.createIndex(opt.column || "id", { config: lancedb.Index.btree() });
  console.log(`indexed: version=${await tbl.version()} indices=${JSON.stringify(await tbl.listIndices())}`);
}

const elapsedMs = (start) => Number(process.hrtime.bigint() - start) / 1e6;

async function createIPC(db, name, file, opt) {
  const table = arrow.tableFromIPC(fs.readFileSync(file));
  const start = process.hrtime.bigint();
  const tbl = await db.createTable(name, table, { mode: "overwrite", storageOptions: storage({ storage: opt.storage || "2.0" }) });
  const ms = elapsedMs(start);
  console.log(JSON.stringify({ rows: await tbl.countRows(), ms }));
}

const keysOf = (opt) => String(opt.on || "id").split(",");

async function mergeInsert(db, name, file, opt) {
  const tbl = await db.openTable(name);
  const source = arrow.tableFromIPC(fs.readFileSync(file));
  let b = tbl.mergeInsert(keysOf(opt));
  if ((opt.matched || "update_all") === "update_all") b = b.whenMatchedUpdateAll();
  if ((opt["not-matched"] || "insert_all") === "insert_all") b = b.whenNotMatchedInsertAll();
  if (opt["by-source"] === "delete") b = b.whenNotMatchedBySourceDelete();
  try {
    const start = process.hrtime.bigint();
    const stats = await b.execute(source);
    const ms = elapsedMs(start);
    console.log(JSON.stringify({ ok: plain(stats), ms }));
  } catch (e) {
    console.log(JSON.stringify({ error: String(e && e.message ? e.message : e) }));
  }
  if (opt.compare) await dump(db, [name, opt.compare], opt);
}

async function dump(db, names, opt) {
  const keys = keysOf(opt);
  for (const name of names) {
    const tbl = await db.openTable(name);
    const rows = (await tbl.query().toArray()).map((r) => r.toJSON());
    rows.sort((x, y) => {
      for (const k of keys) {
        const c = x[k] < y[k] ? -1 : x[k] > y[k] ? 1 : 0;
        if (c !== 0) return c;
      }
      return 0;
    });
    console.log(JSON.stringify(plain({ name, version: await tbl.version(), rows })));
  }
}

const USAGE = "usage: node probe.mjs scenario|verify|race|versions|append|index|create-ipc|merge-insert|dump <dbdir> [name] [file] [options]";

async function main() {
  const { pos, opt } = parseArgs(process.argv.slice(2));
  if (opt.limit) limit = Number(opt.limit);
  const [cmd, dir, name, file] = pos;
  if (!cmd || !dir || (cmd !== "scenario" && !name)) {
    console.error(USAGE);
    process.exit(2);
  }
  const db = await lancedb.connect(dir.includes("://") ? dir : path.resolve(dir));
  const commands = {
    scenario: () => scenario(db, opt),
    verify: () => verify(db, name, opt),
    race: () => race(db, name, opt),
    versions: async () => versions(await db.openTable(name)),
    append: () => append(db, name, opt),
    index: () => index(db, name, opt),
    "create-ipc": () => createIPC(db, name, file, opt),
    "merge-insert": () => mergeInsert(db, name, file, opt),
    dump: () => dump(db, pos.slice(2), opt),
  };
  if (!commands[cmd]) {
    console.error(`unknown command ${cmd}\n${USAGE}`);
    process.exit(2);
  }
  await commands[cmd]();
}

main().catch((e) => {
  console.error("ERROR: " + (e && e.stack ? e.stack : e));
  process.exit(1);
});
