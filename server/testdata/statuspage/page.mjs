// Drives Debian's chromium over Quiver's status page for
// server/statuspage_test.go: node page.mjs <base URL> <screenshot.png> <expect.json>
//
// Phase 1: every endpoint is listed, the degraded one shows its reason,
// the stuck transaction stands out; prints READY and waits for a line on
// stdin (the Go test then puts rows to every endpoint, and sends as that
// line {endpoint: {rows, version}} of the puts).
// Phase 2: the page updates by itself to those rows and last commits. Then a screenshot; the page must have made no request
// outside the server and logged no console error. Prints OK, or the
// failure and exits 1.
import { chromium } from "playwright-core";
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";

const [base, shot, expectFile] = process.argv.slice(2);
const expect = JSON.parse(readFileSync(expectFile, "utf8"));
const origin = new URL(base).origin;
const timeout = 20000;

const browser = await chromium.launch({
  executablePath: process.env.QUIVER_CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox"], // CI runs as root
});
let failed = "";
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const outside = [];
  const consoleErrors = [];
  page.on("request", (r) => {
    const u = r.url();
    if (!u.startsWith("data:") && new URL(u).origin !== origin) outside.push(u);
  });
  page.on("console", (m) => { if (m.type() === "error") consoleErrors.push(m.text()); });
  page.on("pageerror", (e) => consoleErrors.push(e.message));

  await page.goto(base + "/?refresh_ms=250");
  const ep = (name) => page.locator(`[data-testid=endpoint][data-name="${name}"]`);
  for (const name of expect.endpoints) {
    await ep(name).waitFor({ timeout });
  }
  const degraded = ep(expect.degraded.name);
  await degraded.getByTestId("reason").filter({ hasText: expect.degraded.reason }).waitFor({ timeout });
  const state = await degraded.getByTestId("state").textContent();
  if (state !== "degraded") throw new Error(`endpoint ${expect.degraded.name} shows state ${state}, want degraded`);
  await page.locator(`[data-testid=txn][data-writer="${expect.stuck}"][data-stuck=true]`).waitFor({ timeout });

  console.log("READY");
  const lines = createInterface({ input: process.stdin });
  const puts = JSON.parse(await new Promise((resolve) => lines.once("line", resolve)));
  lines.close();

  for (const [name, want] of Object.entries(puts)) {
    const box = ep(name);
    await box.getByTestId("rows").filter({ hasText: new RegExp(`^${want.rows}$`) }).waitFor({ timeout });
    await box.getByTestId("commit-rows").first().filter({ hasText: new RegExp(`^${want.commit_rows}$`) }).waitFor({ timeout });
    const version = await box.getByTestId("commit-version").first().textContent();
    if (version !== want.version) throw new Error(`endpoint ${name}: last commit version ${version}, want ${want.version}`);
  }
  await page.screenshot({ path: shot, fullPage: true });
  if (outside.length) throw new Error("requests outside the server: " + outside.join(", "));
  if (consoleErrors.length) throw new Error("console errors: " + consoleErrors.join(" | "));
} catch (e) {
  failed = e.stack || String(e);
} finally {
  await browser.close();
}
if (failed) {
  console.log("FAILED " + failed);
  process.exit(1);
}
console.log("OK");
