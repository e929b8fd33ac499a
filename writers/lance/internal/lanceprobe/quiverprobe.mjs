// Quiver's own LanceDB commands, next to the shared probe.mjs in the
// probe's cache folder (never in the shared workspace). They drive the real
// Lance core the way a LanceDB user would, for the Go tests and lancebench:
//
//   node quiverprobe.mjs append <dbdir> <name> --from N --count M
//       tbl.add() rows id in [N, N+M) of probe.mjs's scenario schema
//   node quiverprobe.mjs index <dbdir> <name> --column id
//       create a BTree scalar index on the column, print listIndices()
//   node quiverprobe.mjs create-ipc <dbdir> <name> <file.arrow> [--storage 2.0]
//       createTable from an Arrow IPC file, print {"rows":..,"ms":..} where ms
//       times createTable alone (the file is read and decoded before)
//   node quiverprobe.mjs merge-insert <dbdir> <name> <source.arrow> --on id[,k2]
//        [--matched update_all|do_nothing] [--not-matched insert_all|do_nothing]
//        [--by-source keep|delete]
//       LanceDB's mergeInsert of the Arrow IPC source; prints {"ok":{stats},"ms":..}
//       (ms times execute alone, the source is decoded before) or
//       {"error":"..."} (exit 0 either way, for differential tests); with
//       --compare <other> it then dumps <name> and <other> as dump does
//   node quiverprobe.mjs dump <dbdir> <name>... --on id[,k2]
//       one JSON line per table: {"name":..,"version":..,"rows":[..]} with the
//       rows sorted by the key columns (bigints as strings)

import * as lancedb from "@lancedb/lancedb";
import { createRequire } from "node:module";
import * as fs from "node:fs";
import * as path from "node:path";
// The CommonJS apache-arrow instance is the one @lancedb/lancedb uses.
const require = createRequire(import.meta.url);
const arrow = require("apache-arrow");

function parseArgs(argv) {
  const pos = [];
  const opt = {};
  for (let i = 0; i < argv.length; i++) {
    if (argv[i].startsWith("--")) {
      opt[argv[i].slice(2)] = argv[i + 1];
      i++;
    } else {
      pos.push(argv[i]);
    }
  }
  return { pos, opt };
}

async function append(db, name, opt) {
  const from = Number(opt.from || 1000);
  const count = Number(opt.count || 3);
  const tbl = await db.openTable(name);
  const rows = Array.from({ length: count }, (_, k) => {
    const id = from + k;
    return { id: BigInt(id), name: `lancedb${id}`, score: id + 0.25, tags: [`l${id}`] };
  });
  await tbl.add(rows);
  console.log(`appended ${count} rows: version=${await tbl.version()} rows=${await tbl.countRows()}`);
}

async function index(db, name, opt) {
  const tbl = await db.openTable(name);
  await tbl.createIndex(opt.column || "id", { config: lancedb.Index.btree() });
  console.log(`indexed: version=${await tbl.version()} indices=${JSON.stringify(await tbl.listIndices())}`);
}

async function createIPC(db, name, file, opt) {
  const table = arrow.tableFromIPC(fs.readFileSync(file));
  const start = process.hrtime.bigint();
  const tbl = await db.createTable(name, table, {
    mode: "overwrite",
    storageOptions: { new_table_data_storage_version: String(opt.storage || "2.0") },
  });
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  console.log(JSON.stringify({ rows: await tbl.countRows(), ms }));
}

function keysOf(opt) {
  return String(opt.on || "id").split(",");
}

async function mergeInsert(db, name, file, opt) {
  const tbl = await db.openTable(name);
  const source = arrow.tableFromIPC(fs.readFileSync(file));
  let b = tbl.mergeInsert(keysOf(opt));
  if ((opt.matched || "update_all") === "update_all") b = b.whenMatchedUpdateAll();
  if ((opt["not-matched"] || "insert_all") === "insert_all") b = b.whenNotMatchedInsertAll();
  if (opt["by-source"] === "delete") b = b.whenNotMatchedBySourceDelete();
  try {
    const start = process.hrtime.bigint();
    const r = await b.execute(source);
    const ms = Number(process.hrtime.bigint() - start) / 1e6;
    console.log(JSON.stringify({ ok: toPlain(r), ms }));
  } catch (e) {
    console.log(JSON.stringify({ error: String(e && e.message ? e.message : e) }));
  }
  if (opt.compare) await dump(db, [name, opt.compare], opt);
}

function toPlain(v) {
  return JSON.parse(JSON.stringify(v, (_, x) => (typeof x === "bigint" ? x.toString() : x)));
}

function cmpKey(a, b) {
  if (typeof a === "bigint" || typeof b === "bigint") return a < b ? -1 : a > b ? 1 : 0;
  return a < b ? -1 : a > b ? 1 : 0;
}

async function dump(db, names, opt) {
  const keys = keysOf(opt);
  for (const name of names) {
    const tbl = await db.openTable(name);
    const rows = (await tbl.query().toArray()).map((r) => r.toJSON());
    rows.sort((x, y) => {
      for (const k of keys) {
        const c = cmpKey(x[k], y[k]);
        if (c !== 0) return c;
      }
      return 0;
    });
    console.log(JSON.stringify(toPlain({ name, version: await tbl.version(), rows })));
  }
}

async function main() {
  const { pos, opt } = parseArgs(process.argv.slice(2));
  const [cmd, dbdir, name, file] = pos;
  if (cmd === "dump") {
    const db = await lancedb.connect(path.resolve(dbdir));
    await dump(db, pos.slice(2), opt);
    return;
  }
  if (!cmd || !dbdir || !name) {
    console.error("usage: node quiverprobe.mjs append|index|create-ipc|merge-insert|dump <dbdir> <name> [file] [options]");
    process.exit(2);
  }
  const db = await lancedb.connect(path.resolve(dbdir));
  if (cmd === "append") await append(db, name, opt);
  else if (cmd === "index") await index(db, name, opt);
  else if (cmd === "create-ipc") await createIPC(db, name, file, opt);
  else if (cmd === "merge-insert") await mergeInsert(db, name, file, opt);
  else {
    console.error("unknown command " + cmd);
    process.exit(2);
  }
}

main().catch((e) => {
  console.error("ERROR: " + (e && e.stack ? e.stack : e));
  process.exit(1);
});
